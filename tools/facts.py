"""The catalog side of tools/vllm_facts.py: load kind.yml files, check their `facts:` and
`api:` entries against a wheel, and describe differences between two sets of names."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import yaml

from tools import pyread
from tools.wheelsrc import FactsError, Wheel


@dataclass
class Catalog:
    """An `extensions/` folder: vllm.yml plus one folder per kind (kind.yml may be missing)."""

    root: Path
    vllm: dict[str, Any]
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> kind.yml
    folders: list[str] = field(default_factory=list)  # every kind folder, with or without kind.yml

    @property
    def targets(self) -> dict[str, dict[str, Any]]:
        return self.vllm.get("targets") or {}

    def order(self, kind: str) -> tuple[int, str]:
        # Reports list kinds in vllm.yml's order, then any others alphabetically.
        listed = self.vllm.get("kinds") or []
        return (listed.index(kind), "") if kind in listed else (len(listed), kind)


def load_catalog(root: Path) -> Catalog:
    vllm = yaml.safe_load((root / "vllm.yml").read_text())
    catalog = Catalog(root=root, vllm=vllm)
    for folder in sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    ):
        catalog.folders.append(folder.name)
        kind_yml = folder / "kind.yml"
        if kind_yml.is_file():
            spec = yaml.safe_load(kind_yml.read_text()) or {}
            spec["targets"] = releases(spec, catalog.targets)
            catalog.kinds[folder.name] = spec
    return catalog


def version_key(release: object) -> tuple[int, ...]:
    """ "0.33" -> (0, 33): releases compare as versions, not strings ("0.9" < "0.10")."""
    return tuple(int(x) for x in str(release).split("."))


def applies(entry: dict[str, Any], target: str) -> bool:
    """A kind, fact or api entry applies to `target` from its `since` release through its
    `until` release (both optional, both included)."""
    since, until = entry.get("since"), entry.get("until")
    key = version_key(target)
    after = since is None or version_key(since) <= key
    return after and (until is None or key <= version_key(until))


def releases(entry: dict[str, Any], targets: Iterable[str]) -> list[str]:
    """The targets (of vllm.yml) an entry applies to, oldest first: a kind's `targets`."""
    return sorted((str(t) for t in targets if applies(entry, str(t))), key=version_key)


def fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)


def _closest(wanted: str, candidates: list[str]) -> str:
    # Up to three guesses: the most similar existing name is not always the renamed one.
    best = difflib.get_close_matches(wanted, candidates, n=3, cutoff=0.6)
    return f" (renamed? closest: {', '.join(best)})" if best else ""


# -- describing one definition ---------------------------------------------------------------


def _init_params(wheel: Wheel, path: str, cls: ast.ClassDef) -> list[str] | None:
    # A class's signature is its first `__init__` along the vLLM bases (None: object's).
    for _, c in wheel.class_chain(path, cls):
        init = pyread.class_members(c).get("__init__")
        if isinstance(init, ast.FunctionDef | ast.AsyncFunctionDef):
            return pyread.params(init)
    return None


def describe(wheel: Wheel, path: str, node: ast.AST) -> dict[str, Any]:
    """What can drift in a definition: `params`, `signature` (with annotations and defaults)
    and `body` (normalised source) of functions; `params` (of __init__), `abstract` and public
    `members` (with their params) of classes; `value` of constants."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return {
            "params": pyread.params(node),
            "signature": pyread.signature(node),
            "body": pyread.body_text(node),
        }
    if isinstance(node, ast.ClassDef):
        members: dict[str, Any] = {}
        for _, c in reversed(wheel.class_chain(path, node)):
            for name, member in pyread.class_members(c).items():
                if not name.startswith("_"):
                    is_def = isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
                    members[name] = pyread.params(member) if is_def else None  # type: ignore[arg-type]
        return {
            "params": _init_params(wheel, path, node),
            "abstract": sorted(wheel.abstract_members(path, node)),
            "members": members,
        }
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        try:
            return {"value": pyread.plain(pyread.Evaluator(wheel.tree(path)).eval(node.value, {}))}
        except pyread.Unreadable:
            return {"value": "<not a literal>"}
    return {}


def _strip_stars(names: list[str]) -> list[str]:
    # `*args` and `args` are the same parameter for a catalog that leaves the stars out.
    return [str(n).lstrip("*") for n in names]


# -- facts -------------------------------------------------------------------------------------


def check_fact(kind: str, fact: dict[str, Any], wheel: Wheel) -> list[str]:
    """Problems with one `facts:` entry in `wheel`, one readable line each."""
    path, symbol = str(fact.get("path")), str(fact.get("symbol"))
    head = f"kind {kind}: fact {symbol} ({path}): "
    if not wheel.has(path):
        return [
            head
            + f"catalog says file {path}, {wheel.label} has no such file"
            + _closest(path, wheel.py_files())
        ]
    tree = wheel.tree(path)
    node = pyread.find_symbol(tree, symbol)
    if node is None:
        return [
            head
            + f"catalog says symbol {symbol}, {wheel.label} has no such symbol"
            + _closest(symbol, pyread.qualnames(tree))
        ]
    actual = describe(wheel, path, node)
    return [
        head + f"catalog says {aspect} {fmt(want)}, {wheel.label} has {fmt(have)}"
        for aspect, want, have in _mismatches(fact, actual)
    ]


def _mismatches(fact: dict[str, Any], actual: dict[str, Any]) -> list[tuple[str, object, object]]:
    """(aspect, catalog value, wheel value) for each of params/abstract/value that differs."""
    out: list[tuple[str, object, object]] = []
    if "params" in fact:
        want, have = fact["params"] or [], actual.get("params")
        if have is None or _strip_stars(have) != _strip_stars(want):
            out.append(("params", want, have))
    if "abstract" in fact and actual.get("abstract") != sorted(fact["abstract"] or []):
        out.append(("abstract", sorted(fact["abstract"] or []), actual.get("abstract")))
    if "value" in fact and actual.get("value") != pyread.plain(fact["value"]):
        out.append(("value", fact["value"], actual.get("value")))
    return out


def api_entry(entry: dict[str, Any], target: str | None) -> tuple[str, str]:
    """(module, name) of an `api:` entry, with the per-target override applied."""
    merged = {k: v for k, v in entry.items() if k in ("module", "name")}
    override = entry.get(str(target)) if target is not None else None
    if isinstance(override, dict):
        merged.update({k: v for k, v in override.items() if k in ("module", "name")})
    return str(merged.get("module")), str(merged.get("name"))


def check_api(kind: str, key: str, entry: dict[str, Any], target: str, wheel: Wheel) -> list[str]:
    """Problems with one `api:` entry: the module must exist and provide the name."""
    module, name = api_entry(entry, target)
    head = f"kind {kind}: api {key} ({module}.{name}): "
    if module.split(".")[0] != "vllm":
        # Another library's API (transformers): checked in its wheel at the lowest version the
        # vLLM wheel requires.
        from tools.extractors import requirement_wheel

        try:
            wheel = requirement_wheel(wheel, module.split(".")[0])
        except FactsError as exc:
            return [head + str(exc)]
    if wheel.module_path(module) is None:
        modules = [pyread.module_of(p) for p in wheel.py_files()]
        return [
            head
            + f"catalog says module {module}, {wheel.label} has no such module"
            + _closest(module, modules)
        ]
    if not wheel.exports(module, name):
        path = wheel.module_path(module) or ""
        names = list(pyread.members(wheel.tree(path).body)) + sorted(
            pyread.imported_names(wheel.tree(path))
        )
        return [
            head
            + f"catalog says {module} provides {name}, {wheel.label} has no such name"
            + _closest(name, names)
        ]
    return []


def resolve_api(wheel: Wheel, module: str, name: str) -> tuple[str, ast.AST] | None:
    path = wheel.module_path(module)
    return wheel.resolve(path, name) if path else None


# -- comparing names ---------------------------------------------------------------------------


# How similar a removed and an added name must be to be reported as one rename (difflib ratio):
# hermes -> hermes2 is 0.92, register_lazy_module -> register_lazy_parser 0.75.
RENAME_RATIO = 0.7


def renames(removed: set[str], added: set[str]) -> list[tuple[str, str]]:
    """Best-guess (old, new) pairs between removed and added names, most similar first."""
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, old, new).ratio(), old, new)
            for old in removed
            for new in added
        ),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    pairs, used_old, used_new = [], set(), set()
    for ratio, old, new in scored:
        if ratio >= RENAME_RATIO and old not in used_old and new not in used_new:
            pairs.append((old, new))
            used_old.add(old)
            used_new.add(new)
    return sorted(pairs)


def compare_values(
    old: object,
    new: object,
    old_label: str,
    new_label: str,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Differences between two extracted values (name lists or mappings), one line each,
    without the `kind <id>: <field>: ` prefix. Mapping keys in `skip` (already reported as
    added/removed names) are not reported again."""
    if isinstance(old, list) and isinstance(new, list):
        return _compare_lists([str(v) for v in old], [str(v) for v in new], old_label, new_label)
    if isinstance(old, dict) and isinstance(new, dict):
        keys_old = sorted(k for k in old if k not in skip)
        keys_new = sorted(k for k in new if k not in skip)
        lines = _compare_lists(keys_old, keys_new, old_label, new_label)
        changed = [
            f"{k}: {fmt(old[k])} -> {fmt(new[k])}"
            for k in sorted(set(old) & set(new))
            if old[k] != new[k]
        ]
        if changed:
            lines.append(f"changed ({old_label} -> {new_label}): " + "; ".join(changed))
        return lines
    return [] if old == new else [f"{old_label} has {fmt(old)}, {new_label} has {fmt(new)}"]


def _compare_lists(old: list[str], new: list[str], old_label: str, new_label: str) -> list[str]:
    removed, added = set(old) - set(new), set(new) - set(old)
    pairs = renames(removed, added)
    removed -= {o for o, _ in pairs}
    added -= {n for _, n in pairs}
    lines = []
    if added:
        lines.append(
            f"added in {new_label} ({len(added)}, not in {old_label}): " + ", ".join(sorted(added))
        )
    if removed:
        lines.append(
            f"removed in {new_label} ({len(removed)}, only in {old_label}): "
            + ", ".join(sorted(removed))
        )
    for o, n in pairs:
        lines.append(f"renamed (best guess by similarity): {o} ({old_label}) -> {n} ({new_label})")
    return lines


def compare_objects(
    old: dict[str, Any], new: dict[str, Any], old_label: str, new_label: str
) -> list[str]:
    """Field-by-field differences of two per-target builtins objects, `<field>: <line>` each.
    A name added to a list field is not repeated for the mappings keyed by it."""
    listed: set[str] = set()
    for key in set(old) | set(new):
        a, b = old.get(key), new.get(key)
        if isinstance(a, list) and isinstance(b, list):
            listed |= {str(v) for v in a} ^ {str(v) for v in b}
    lines = []
    for key in sorted(set(old) | set(new)):
        values = compare_values(old.get(key), new.get(key), old_label, new_label, frozenset(listed))
        lines += [f"{key}: {line}" for line in values]
    return lines


# How many changed lines of a body diff a report shows, and how long each may be; the rest are
# counted.
BODY_DIFF_LINES = 3
BODY_LINE_WIDTH = 70


def body_diff(
    old: str, new: str, lines: int = BODY_DIFF_LINES, width: int = BODY_LINE_WIDTH
) -> str:
    """A short diff of two normalised bodies: the first `lines` changed lines, `-`/`+` and the
    line without its indentation (cut at `width`), joined by ` | `; then a count of the rest."""
    changed = [
        line[0] + line[1:].strip()
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    shown = [c if len(c) <= width else c[: width - 3] + "..." for c in changed[:lines]]
    more = len(changed) - lines
    return " | ".join(shown) + (f" | ... {more} more" if more > 0 else "")


# What a change does to code written against the older release (`diff` sections): a name or
# signature it relies on is gone or different; the same names behave differently; something
# was added beside what it uses.
BREAKING, BEHAVIOUR, ADDED = 1, 2, 4


def _member_sig(params: object) -> str:
    return "(not a method)" if params is None else fmt(params)


def params_change(old: object, new: object) -> str:
    """`params [a, b] -> [a, c]`; two lists as one, what went `-`, what came `+`, long runs of
    unchanged names cut: `params [self, job_id, -src_spec +device_ptrs, dst_spec]`."""
    if not isinstance(old, list) or not isinstance(new, list):
        return f"params {_member_sig(old)} -> {_member_sig(new)}"
    merged: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            run = [str(n) for n in old[i1:i2]]
            merged += run if len(run) <= 3 else [run[0], "...", run[-1]]
        else:
            merged.append(" ".join([f"-{n}" for n in old[i1:i2]] + [f"+{n}" for n in new[j1:j2]]))
    return f"params [{', '.join(merged)}]"


def value_change(old: object, new: object, width: int = 80) -> str:
    """A constant's new value: the keys or items it gained, lost or changed, for a mapping or
    a list; else both values, each cut at `width`."""
    if isinstance(old, dict) and isinstance(new, dict):
        moved = [f"+{k}" for k in new if k not in old] + [f"-{k}" for k in old if k not in new]
        moved += [
            f"{k}: {fmt(old[k])} -> {fmt(new[k])}" for k in old if k in new and old[k] != new[k]
        ]
        return ", ".join(moved) or "reordered"
    if isinstance(old, list) and isinstance(new, list):
        moved = [f"+{v}" for v in new if v not in old] + [f"-{v}" for v in old if v not in new]
        return ", ".join(str(m) for m in moved) or "reordered"
    a, b = (
        text if len(text) <= width else text[: width - 3] + "..." for text in (fmt(old), fmt(new))
    )
    return f"{a} -> {b}"


def description_changes(
    old: dict[str, Any],
    new: dict[str, Any],
    body_lines: int = BODY_DIFF_LINES,
    body_width: int = BODY_LINE_WIDTH,
) -> list[tuple[int, str | None, str]]:
    """What changed between two `describe` results of one definition, as (section, member,
    text): member None for the definition itself (its parameters, annotations and defaults,
    body, abstract set, value), else the name of a public member of a class (removed, renamed,
    added, other parameters)."""
    out: list[tuple[int, str | None, str]] = []
    if old.get("params") != new.get("params"):
        out.append((BREAKING, None, params_change(old.get("params"), new.get("params"))))
    elif old.get("signature") != new.get("signature"):
        # Same names, other annotations or defaults: a changed default changes behaviour.
        # zip_longest: an added or dropped return annotation makes the lists differ in length.
        changed = [
            f"{a or '(none)'} -> {b or '(none)'}"
            for a, b in zip_longest(old.get("signature") or [], new.get("signature") or [])
            if a != b
        ]
        out.append((BEHAVIOUR, None, f"annotations or defaults changed: {'; '.join(changed)}"))
    if old.get("body") is not None and new.get("body") is not None and old["body"] != new["body"]:
        diff = body_diff(old["body"], new["body"], body_lines, body_width)
        out.append((BEHAVIOUR, None, "body: " + diff))
    if "abstract" in old or "abstract" in new:
        before, after = set(old.get("abstract") or []), set(new.get("abstract") or [])
        moved = [f"+{n}" for n in sorted(after - before)] + [
            f"-{n}" for n in sorted(before - after)
        ]
        if moved:
            out.append((BREAKING, None, "abstract " + ", ".join(moved)))
    if ("value" in old or "value" in new) and old.get("value") != new.get("value"):
        out.append((BEHAVIOUR, None, "value " + value_change(old.get("value"), new.get("value"))))
    old_m, new_m = old.get("members") or {}, new.get("members") or {}
    removed, added = set(old_m) - set(new_m), set(new_m) - set(old_m)
    pairs = renames(removed, added)
    for o, n in pairs:
        out.append((BREAKING, o, f"removed (renamed {n}? best guess by similarity)"))
    # A member the class now declares abstract is reported there, not again as added.
    new_abstract = set(new.get("abstract") or []) - set(old.get("abstract") or [])
    out += [(BREAKING, m, "removed") for m in sorted(removed - {o for o, _ in pairs})]
    out += [(ADDED, m, "added") for m in sorted(added - {n for _, n in pairs} - new_abstract)]
    for name in sorted(set(old_m) & set(new_m)):
        if old_m[name] != new_m[name]:
            out.append((BREAKING, name, params_change(old_m[name], new_m[name])))
    return out
