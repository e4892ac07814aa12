"""Follow vLLM releases from the wheel source: `python -m tools.vllm_facts extract|check|diff`.

- `extract [--target T ...]` writes extensions/<kind>/builtins.json: vLLM's built-in names
  per target, read from the target's wheel (targets.<t>.wheel in extensions/vllm.yml).
- `check [--target T ...] [--wheel PATH --as T]` verifies every kind.yml `facts:` and `api:`
  entry and every builtins.json against the wheels; exit 1 with one line per problem.
- `diff FROM TO` (targets or wheel paths) reports the drift between two releases, per kind.

vLLM is never imported: the wheel is opened with zipfile and its sources read with ast, so
this runs anywhere with Python 3.11 + PyYAML. Each kind's extensions/<kind>/recipe.py is the one
place that says where its built-in names live in vLLM's source (RECIPES, via tools/recipes.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tools import extractors as ex
from tools import pyread
from tools.facts import (
    ADDED,
    BEHAVIOUR,
    BREAKING,
    Catalog,
    api_entry,
    applies,
    body_diff,
    check_api,
    check_fact,
    compare_objects,
    describe,
    description_changes,
    fmt,
    load_catalog,
    renames,
    resolve_api,
    version_key,
)
from tools.recipes import Recipe
from tools.recipes import load as load_recipes
from tools.wheelsrc import FactsError, Wheel, load_wheel, wheel_for_spec

GENERATED_BY = "python -m tools.vllm_facts extract"
DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "extensions"
RECIPE_HOME = "extraction recipes live in extensions/<kind>/recipe.py"


# What a patch may target (extensions/patch/targets/<target>/, read by the patch kind only):
# every module, class, function and attribute of the wheel, with each function's signature.
PATCH_TARGETS = ex.patch_targets()
# The targets data is cut into numbered shards of at most this many bytes, modules in name
# order: a render loads the index and the one shard it needs. Few files matter as much as small
# ones: copier checks the whole template out on every copy and update, and there a file costs
# more than its bytes (one shard per module group was 708 files, a third of an all-kinds copy).
PATCH_SHARD_BYTES = 200_000


def patch_shards(targets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The files of one target's patch-targets data: {file name: text}. `index.json` maps each
    module to its shard; a shard holds {module: {qualname: what}}, one module a line."""

    def line(module: str) -> str:
        return json.dumps(module) + ": " + json.dumps(targets[module], separators=(",", ":"))

    files: dict[str, list[str]] = {}
    shard_of: dict[str, str] = {}
    shard, used = "", 0
    for module in sorted(targets):
        size = len(line(module)) + 2  # the separator and newline
        if not shard or used + size > PATCH_SHARD_BYTES:
            shard, used = f"{len(files) + 1:02d}", len("{\n\n}\n")
        used += size
        shard_of[module] = shard
        files.setdefault(shard, []).append(line(module))
    out = {f"{shard}.json": "{\n" + ",\n".join(lines) + "\n}\n" for shard, lines in files.items()}
    out["index.json"] = dump({"generated_by": GENERATED_BY, "modules": shard_of})
    return out


def write_patch_targets(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """Writes extensions/patch/targets/<target>/ from the wheel; the paths it changed."""
    folder = catalog.root / catalog.kinds["patch"]["data"] / target
    files = patch_shards(PATCH_TARGETS(wheel))
    changed = []
    folder.mkdir(parents=True, exist_ok=True)
    for stale in sorted(set(p.name for p in folder.glob("*.json")) - set(files)):
        (folder / stale).unlink()
        changed.append(str(folder / stale))
    for name, text in files.items():
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(str(path))
    return changed


def check_patch_targets(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """extensions/patch/targets/<target>/ against a fresh extraction from the wheel."""
    home = catalog.kinds["patch"]["data"]
    folder = catalog.root / home / target
    files = patch_shards(PATCH_TARGETS(wheel))
    stored = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
    stale = sorted(n for n in files if n not in stored or (folder / n).read_text() != files[n])
    stale += sorted(stored - set(files))
    if not stale:
        return []
    return [
        f"kind patch: {home}/{target}: {len(stale)} files differ from {wheel.label}"
        f" (first {stale[0]}; run {GENERATED_BY})"
    ]


# Every kind's recipe, from extensions/<kind>/recipe.py, in the order of vllm.yml `kinds`.
RECIPES: dict[str, Recipe] = load_recipes()


# -- wheels and targets ------------------------------------------------------------------------


def open_target(catalog: Catalog, target: str) -> Wheel:
    spec = catalog.targets.get(target, {}).get("wheel")
    if not spec:
        raise FactsError(f"target {target!r} has no wheel in {catalog.root / 'vllm.yml'}")
    return load_wheel(wheel_for_spec(str(spec)))


def open_ref(catalog: Catalog, ref: str) -> tuple[str, Wheel, str | None]:
    """A `diff` argument: a target id from vllm.yml or a path to a wheel file."""
    if ref in catalog.targets:
        return ref, open_target(catalog, ref), ref
    path = Path(ref)
    if path.is_file():
        wheel = load_wheel(path)
        return wheel.version, wheel, None
    raise FactsError(
        f"{ref!r} is neither a target in vllm.yml ({', '.join(catalog.targets)}) nor a wheel file"
    )


def extract_kind(recipe: Recipe, wheel: Wheel) -> dict[str, Any] | None:
    """One kind's per-target object, or None when the kind does not exist in this wheel."""
    if recipe.present is not None and not recipe.present(wheel):
        return None
    out: dict[str, Any] = {"names": recipe.names(wheel)}
    for key, values in recipe.extras.items():
        value = values(wheel)
        if value is not None:
            out[key] = value
    return out


def extract_all(wheel: Wheel, kinds: Sequence[str]) -> dict[str, dict[str, Any] | None]:
    """Every kind's per-target object; a recipe that no longer matches the wheel is an error."""
    results, errors = extract_each(wheel, kinds)
    if errors:
        raise FactsError("\n".join(errors.values()))
    return results


def extract_each(
    wheel: Wheel, kinds: Sequence[str]
) -> tuple[dict[str, dict[str, Any] | None], dict[str, str]]:
    """Like extract_all, but a broken recipe becomes an error line for its kind and the
    others go on (check and diff report every kind, also for a new release)."""
    results: dict[str, dict[str, Any] | None] = {}
    errors: dict[str, str] = {}
    for kind in kinds:
        try:
            results[kind] = extract_kind(RECIPES[kind], wheel)
        except FactsError as exc:
            errors[kind] = f"kind {kind}: recipe no longer matches {wheel.label}: {exc}"
    return results, errors


def dump(doc: dict[str, Any]) -> str:
    # Byte-identical reruns: sorted keys, fixed indent, trailing newline.
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


# -- extract -----------------------------------------------------------------------------------


def cmd_extract(catalog: Catalog, targets: list[str]) -> int:
    fresh = {t: extract_all(open_target(catalog, t), list(RECIPES)) for t in targets}
    for kind, recipe in RECIPES.items():
        path = catalog.root / kind / "builtins.json"
        per_target: dict[str, Any] = {}
        if set(targets) != set(catalog.targets) and path.is_file():
            # A partial run keeps the other targets' entries as they are.
            per_target = {
                t: v
                for t, v in json.loads(path.read_text())["targets"].items()
                if t in catalog.targets
            }
        for t in targets:
            per_target.pop(t, None)
            if fresh[t][kind] is not None:
                per_target[t] = fresh[t][kind]
        doc = {"generated_by": GENERATED_BY, "what": recipe.what, "targets": per_target}
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != dump(doc):
            path.write_text(dump(doc))
            print(f"wrote {path}")
    for t in targets if "patch" in catalog.kinds else []:
        for path in write_patch_targets(catalog, t, open_target(catalog, t)):
            print(f"wrote {path}")
    print(f"extracted {len(RECIPES)} kinds and the patch targets for {', '.join(targets)}")
    return 0


# -- check -------------------------------------------------------------------------------------


def check_builtins(
    catalog: Catalog, kind: str, target: str, fresh: dict[str, Any] | None, wheel: Wheel
) -> list[str]:
    """builtins.json's entry for `target` against a fresh extraction from `wheel`."""
    path = catalog.root / kind / "builtins.json"
    head = f"kind {kind}: builtins.json"
    if not path.is_file():
        return [f"{head}: missing (run {GENERATED_BY})"]
    doc = json.loads(path.read_text())
    stored = doc.get("targets", {}).get(target)
    problems = []
    if doc.get("what") != RECIPES[kind].what or doc.get("generated_by") != GENERATED_BY:
        problems.append(f"{head}: header differs from the recipe (run {GENERATED_BY})")
    if stored is None and fresh is None:
        return problems
    if stored is None or fresh is None:
        where = "has no entry" if stored is None else "has an entry"
        what = "has the kind" if fresh is not None else "does not have the kind"
        return [*problems, f"{head}: {where} for target {target}, {wheel.label} {what}"]
    return problems + [
        f"{head} {line}" for line in compare_objects(stored, fresh, "builtins.json", wheel.label)
    ]


def check_kind_yml(
    kind: str, spec: dict[str, Any], target: str, wheel: Wheel
) -> tuple[list[str], int, int]:
    """Problems with one kind.yml's facts and api names, and how many of each were checked."""
    problems = []
    if "builtins" in spec:
        # One place per recipe: extensions/<kind>/recipe.py. catalog.jinja replaces the key
        # with builtins.json.
        problems.append(f"kind {kind}: kind.yml has a builtins: block; {RECIPE_HOME}")
    if not applies(spec, target):
        return problems, 0, 0
    facts = [f for f in spec.get("facts") or [] if isinstance(f, dict) and applies(f, target)]
    api = {
        k: e
        for k, e in (spec.get("api") or {}).items()
        if isinstance(e, dict) and applies(e, target)
    }
    malformed = [f for f in spec.get("facts") or [] if not isinstance(f, dict)]
    malformed += [k for k, e in (spec.get("api") or {}).items() if not isinstance(e, dict)]
    problems += [f"kind {kind}: kind.yml entry {m!r} is not a mapping" for m in malformed]
    for fact in facts:
        problems += check_fact(kind, fact, wheel)
        reviewed = fact.get("reviewed", {})
        if not isinstance(reviewed, dict) or not all(
            isinstance(v, str) and v.strip() for v in reviewed.values()
        ):
            problems.append(
                f"kind {kind}: fact {fact.get('symbol')} ({fact.get('path')}): reviewed: must map"
                ' a target to one line (what changed; what the template does): {"0.34": "..."}'
            )
    for key, entry in api.items():
        problems += check_api(kind, key, entry, target, wheel)
    return problems, len(facts), len(api)


def check_pins(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """vllm.yml's hand-typed facts of a target against the wheel's METADATA: the distribution
    and version (`wheel`, `version`), the Python the generated plugin declares (`python`: the
    wheel's Requires-Python lower bound) and the `vllm` extra's range (`requirement`: the
    target's minor)."""
    spec = catalog.vllm["targets"][target]
    meta = dict(line.split(": ", 1) for line in wheel.metadata().splitlines() if ": " in line[:40])
    problems = []
    name, _, version = str(spec.get("wheel", "")).partition("==")
    if (name, version) != (meta.get("Name"), meta.get("Version")):
        problems.append(
            f"vllm.yml targets.{target}.wheel: {spec.get('wheel')}, but the wheel is"
            f" {meta.get('Name')}=={meta.get('Version')}"
        )
    if str(spec.get("version")) != str(meta.get("Version", "")).split("+")[0]:
        problems.append(
            f"vllm.yml targets.{target}.version: {spec.get('version')}, but the wheel is"
            f" {meta.get('Version')}"
        )
    floor = re.search(r">=\s*([0-9.]+)", meta.get("Requires-Python", ""))
    if floor is None or spec.get("python") != f">={floor.group(1)}":
        problems.append(
            f"vllm.yml targets.{target}.python: {spec.get('python')!r}, but the wheel requires"
            f" Python {meta.get('Requires-Python')!r} (write its lower bound, >=X.Y)"
        )
    major, minor = str(spec.get("version")).split(".")[:2]
    wanted = f"vllm>={major}.{minor},<{major}.{int(minor) + 1}"
    if spec.get("requirement") != wanted:
        problems.append(
            f"vllm.yml targets.{target}.requirement: {spec.get('requirement')!r}, but the"
            f" target's minor is {major}.{minor} ({wanted!r})"
        )
    return problems


def check_target(catalog: Catalog, target: str, wheel: Wheel) -> tuple[list[tuple[str, str]], str]:
    """All problems for one target (as (kind, line)), and a one-line summary."""
    problems: list[tuple[str, str]] = [
        ("general", line) for line in check_pins(catalog, target, wheel)
    ]
    n_facts = n_api = 0
    for kind, spec in catalog.kinds.items():
        lines, facts, api = check_kind_yml(kind, spec, target, wheel)
        problems += [(kind, line) for line in lines]
        n_facts, n_api = n_facts + facts, n_api + api
    listed_by = [k for k, spec in catalog.kinds.items() if target in (spec.get("targets") or [])]
    if not listed_by or not n_facts:
        # An OK that checked nothing would say the target is supported when no kind is.
        problems.append(
            (
                "general",
                f"target {target}: {len(listed_by)} kinds list it, {n_facts} facts checked:"
                " set `since:` (or `until:`) in the kind.yml of each kind that exists there",
            )
        )
    # builtins.json: in every kind folder, and for every kind vllm.yml lists.
    listed = catalog.vllm.get("kinds") or []
    kinds = sorted(k for k in RECIPES if k in catalog.folders or k in listed)
    fresh, errors = extract_each(wheel, kinds)
    problems += [(kind, line) for kind, line in errors.items()]
    for kind in fresh:
        lines = check_builtins(catalog, kind, target, fresh[kind], wheel)
        problems += [(kind, line) for line in lines]
    if "patch" in catalog.kinds:
        problems += [("patch", line) for line in check_patch_targets(catalog, target, wheel)]
    for folder in catalog.folders:
        if folder not in RECIPES and (catalog.root / folder / "builtins.json").is_file():
            problems.append((folder, f"kind {folder}: builtins.json has no recipe; {RECIPE_HOME}"))
    summary = (
        f"{target}: {wheel.distribution} {wheel.version} ({wheel.path.name}): "
        f"{n_facts} facts, {n_api} api names, {len(kinds)} builtins.json checked"
    )
    return problems, summary


# Bodies of function facts are compared between each target and the one before it from this
# target on: a changed body needs a `reviewed: {"<target>": "..."}` line on the fact. Earlier
# targets were added before this gate; their body changes were read in `diff`.
BODY_REVIEW_FROM = "0.34"


def _function(
    wheel: Wheel, path: str, symbol: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    node = _find(wheel, path, symbol)
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


def check_bodies(
    catalog: Catalog, target: str, wheel: Wheel, base: tuple[str, Wheel], review: bool
) -> list[tuple[str, str]]:
    """Function facts of `target` whose normalised body differs between `base` (a target and
    its wheel) and `wheel`: a function the kind relies on that behaves differently under the
    same name. With `review` (`base` is the target before `target`), a fact's `reviewed:`
    line for `target` acknowledges the change, and one for a body that did not change is
    stale; without it (`wheel` stands in for `base`'s target) every change is reported."""
    base_target, base_wheel = base
    problems: list[tuple[str, str]] = []
    for kind, spec in catalog.kinds.items():
        if not applies(spec, target) or (review and not applies(spec, base_target)):
            continue
        for fact in spec.get("facts") or []:
            if not isinstance(fact, dict) or not applies(fact, target):
                continue
            if review and not applies(fact, base_target):
                continue  # a fact split at `target` (since / until): written for each side
            path, symbol = str(fact.get("path")), str(fact.get("symbol"))
            old, new = _function(base_wheel, path, symbol), _function(wheel, path, symbol)
            if old is None or new is None:
                continue  # not a function, or missing: check_fact says so
            a, b = pyread.body_text(old), pyread.body_text(new)
            head = f"kind {kind}: fact {symbol} ({path}): "
            reviewed = fact.get("reviewed") or {}
            note = reviewed.get(target) if isinstance(reviewed, dict) else None
            if a == b:
                if review and note:
                    problems.append(
                        (
                            kind,
                            head + f"reviewed: names {target}, but the body is the same in"
                            f" {base_wheel.label} and {wheel.label} (remove the line)",
                        )
                    )
                continue
            if review and isinstance(note, str) and note.strip():
                continue
            if review:
                said = (
                    f"body changed from {base_target} ({base_wheel.label}) to {wheel.label}:"
                    f" behaviour may differ; review it, then add to the fact reviewed:"
                    f' {{"{target}": "<what changed; what the template does about it>"}}'
                )
            else:
                said = (
                    f"body changed in {wheel.label} from target {base_target}'s"
                    f" {base_wheel.label}: behaviour may differ; review it, then update the"
                    " kind's fragments or facts"
                )
            problems.append((kind, head + f"{said}: {body_diff(a, b)}"))
    return problems


def template_root(catalog: Catalog) -> Path | None:
    """The template checkout whose extensions/ the catalog is (copier renders from it)."""
    root = catalog.root.resolve().parent
    return root if catalog.root.name == "extensions" and (root / "copier.yml").is_file() else None


def all_kinds(catalog: Catalog, target: str) -> list[str]:
    """The kinds that exist in `target`, in the order of the `kinds` question."""
    listed = [k for k in catalog.vllm.get("kinds") or [] if k in catalog.kinds]
    return [k for k in listed if target in catalog.kinds[k]["targets"]]


def copier_exe() -> str | None:
    beside = Path(sys.executable).with_name("copier")
    return shutil.which("copier") or (str(beside) if beside.is_file() else None)


def render_target(catalog: Catalog, target: str) -> tuple[list[str], str]:
    """`copier copy --defaults` of a plugin of every kind of `target` from this checkout
    (uncommitted changes included, as the render tier does), and every Python file it
    writes parsed: (problems, one line saying what was done)."""
    root, exe = template_root(catalog), copier_exe()
    kinds = all_kinds(catalog, target)
    if root is None:
        return [], f"{target}: render not run: {catalog.root} is not the extensions/ of a template"
    if exe is None:
        return [], f"{target}: render not run: copier is not installed (pip install copier)"
    with tempfile.TemporaryDirectory(prefix="vllm-facts-render-") as tmp:
        answers, dest = Path(tmp) / "answers.yml", Path(tmp) / "plugin"
        answers.write_text(yaml.safe_dump({"kinds": kinds, "vllm_target": target}))
        cmd = [exe, "copy", "--defaults", "--quiet", "--data-file", str(answers)]
        cmd += ["--vcs-ref", "HEAD"] if (root / ".git").exists() else []
        proc = subprocess.run(
            [*cmd, str(root), str(dest)], capture_output=True, text=True, timeout=900
        )
        head = f"render {target}: a plugin of all {len(kinds)} kinds"
        if proc.returncode != 0:
            said = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            last = said[-1].strip() if said else "no output"
            return [f"{head}: copier copy failed (exit {proc.returncode}): {last}"], ""
        problems = []
        for path in sorted(dest.rglob("*.py")):
            try:
                ast.parse(path.read_text(), filename=str(path))
            except SyntaxError as exc:
                rel = path.relative_to(dest)
                problems.append(f"{head}: {rel} does not parse: {exc.msg} (line {exc.lineno})")
    return problems, f"{target}: rendered a plugin of all {len(kinds)} kinds"


def loader_tier(catalog: Catalog, target: str, run: bool) -> tuple[list[str], str]:
    """The render tier's all-kinds package run through its generated suite's loader tier in
    `target`'s real vLLM (tests/test_real_vllm.py, environments of tests/realvllm/envs.py):
    run with `run`, else the command that does."""
    root = template_root(catalog)
    select = f"test_all_kinds_package_passes_its_suite and {target}"
    args = ["-m", "pytest", "-m", "real_vllm", "tests/test_real_vllm.py", "-k", select]
    shown = f"python {' '.join(args[:-1])} '{select}'"
    if not run or root is None:
        return [], f"{target}: loader tier not run (--loaders runs it): {shown}"
    proc = subprocess.run(
        [sys.executable, *args, "-n", "0", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        said = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        last = said[-1].strip() if said else "no output"
        return [f"loaders {target}: {shown} exited {proc.returncode}: {last}"], ""
    return [], f"{target}: loader tier passed in vLLM {target} ({shown})"


def cmd_check(
    catalog: Catalog,
    targets: list[str],
    wheel_path: str | None,
    as_target: str | None,
    render: bool = True,
    loaders: bool = False,
) -> int:
    runs: list[tuple[str, Wheel]]
    ordered = sorted(catalog.targets, key=version_key)
    if wheel_path:
        target = as_target or str(catalog.vllm.get("latest"))
        if not Path(wheel_path).is_file():
            raise FactsError(f"no wheel file {wheel_path}")
        runs = [(target, load_wheel(Path(wheel_path)))]
    else:
        runs = [(t, open_target(catalog, t)) for t in targets]
    all_problems: list[tuple[str, str]] = []
    summaries = []
    for target, wheel in runs:
        problems, summary = check_target(catalog, target, wheel)
        if wheel_path:
            # The wheel stands in for the target: what its functions do differently from the
            # target's own wheel.
            own = open_target(catalog, target) if target in catalog.targets else None
            if own is not None and own.path.resolve() != wheel.path.resolve():
                problems += check_bodies(catalog, target, wheel, (target, own), review=False)
        elif target in ordered and ordered.index(target) > 0:
            previous = ordered[ordered.index(target) - 1]
            if version_key(target) >= version_key(BODY_REVIEW_FROM):
                base = (previous, open_target(catalog, previous))
                problems += check_bodies(catalog, target, wheel, base, review=True)
        # The template: a plugin of every kind renders for the target; its loader tier.
        rendered, said = render_target(catalog, target) if render else ([], "")
        status = [said or f"{target}: render not run (--no-render)"]
        loaded, said = loader_tier(catalog, target, loaders)
        status += [said] if said else []
        problems += [("~template", line) for line in rendered + loaded]
        all_problems += [(k, f"{line} [target {target}]") for k, line in problems]
        summaries.append(summary + (f": {len(problems)} problems" if problems else ": OK"))
        summaries += status
    for _, line in sorted(all_problems, key=lambda p: catalog.order(p[0])):
        print(line)
    if any("builtins.json" in line for _, line in all_problems):
        print(f"builtins.json is generated: update the kind folders, then run {GENERATED_BY}")
    for summary in summaries:
        print(summary)
    return 1 if all_problems else 0


# -- diff --------------------------------------------------------------------------------------

# Sections of the drift report (tools.facts: BREAKING, BEHAVIOUR, ADDED), and the built-in
# names between the second and the last.
BUILTINS = 3
SECTIONS = {
    BREAKING: "breaks code written for {a}: gone, or another signature or abstract set",
    BEHAVIOUR: "same names, other behaviour: read each",
    BUILTINS: "built-in names, per kind and table",
    ADDED: "added to what the catalog names",
}
# Order within a section: a module gone, a definition gone, its own signature, its members.
GONE_MODULE, GONE, OWN, MEMBER = range(4)
# Report lines are wrapped at this width; name lists are cut to what fits, with a count.
WIDTH = 160


@dataclass
class Change:
    """One change of one vLLM symbol, and every kind whose catalog names it."""

    section: int
    rank: int
    subject: str  # "module" or "module:Qualname": where the changed name lives
    text: str  # "<name>: <what changed>"
    kinds: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)  # what the catalog names in a module gone


@dataclass
class Drift:
    changes: dict[tuple[int, str, str], Change] = field(default_factory=dict)
    # (kind, table, removed, renamed, changed, added): built-in names, section 3.
    tables: list[tuple[str, str, list[str], list[str], list[str], list[str]]] = field(
        default_factory=list
    )

    def add(
        self, section: int, rank: int, subject: str, text: str, kind: str, name: str = ""
    ) -> None:
        change = self.changes.setdefault(
            (section, subject, text), Change(section, rank, subject, text)
        )
        change.kinds.add(kind)
        change.rank = min(change.rank, rank)
        if name:
            change.names.add(name)


def _find(wheel: Wheel, path: str, symbol: str) -> ast.AST | None:
    return pyread.find_symbol(wheel.tree(path), symbol) if wheel.has(path) else None


def _definition_changes(
    drift: Drift, kind: str, module: str, symbol: str, da: dict[str, Any], db: dict[str, Any]
) -> None:
    """The changes of one definition (`symbol` in `module`), keyed by where its names live: the
    definition's own under its module or class, its members' under itself."""
    owner, _, name = symbol.rpartition(".")
    container = f"{module}:{owner}" if owner else module
    for section, member, text in description_changes(da, db, body_lines=2, body_width=50):
        if member is None and "members" in db:
            # A class's own abstract set or __init__: said of the class, with its members.
            drift.add(section, OWN, f"{module}:{symbol}", text, kind)
        elif member is None:
            drift.add(section, OWN, container, f"{name}: {text}", kind)
        else:
            drift.add(section, MEMBER, f"{module}:{symbol}", f"{member}: {text}", kind)


def _gone(drift: Drift, kind: str, wheel: Wheel, path: str, symbol: str) -> None:
    """A fact's symbol that `wheel` lacks: its module gone, or the first part of its dotted
    name that is (a method of a class gone is the class gone)."""
    module = pyread.module_of(path)
    if not wheel.has(path):
        drift.add(BREAKING, GONE_MODULE, module, "module gone", kind, symbol)
        return
    parts = symbol.split(".")
    n = next(i for i in range(1, len(parts) + 1) if _find(wheel, path, ".".join(parts[:i])) is None)
    owner = ".".join(parts[: n - 1])
    drift.add(
        BREAKING, GONE, f"{module}:{owner}" if owner else module, f"{parts[n - 1]}: removed", kind
    )


def _def_name(node: ast.AST) -> str:
    if isinstance(node, ast.Assign | ast.AnnAssign):
        return (pyread.assigned_names(node) or ["?"])[0]
    return str(getattr(node, "name", "?"))


def diff_catalog(
    catalog: Catalog,
    old: tuple[str, Wheel, str | None],
    new: tuple[str, Wheel, str | None],
    drift: Drift,
) -> None:
    """Every kind.yml fact and api name whose definition differs between two wheels."""
    (_, wa, ta), (_, wb, tb) = old, new
    for kind, spec in catalog.kinds.items():
        for fact in spec.get("facts") or []:
            if not isinstance(fact, dict):
                continue
            path, symbol = str(fact.get("path")), str(fact.get("symbol"))
            na, nb = _find(wa, path, symbol), _find(wb, path, symbol)
            if na is None and nb is None:
                continue
            module = pyread.module_of(path)
            if nb is None:
                _gone(drift, kind, wb, path, symbol)
            elif na is None:
                owner, _, name = symbol.rpartition(".")
                drift.add(
                    ADDED, OWN, f"{module}:{owner}" if owner else module, f"{name}: added", kind
                )
            else:
                da, db = describe(wa, path, na), describe(wb, path, nb)
                _definition_changes(drift, kind, module, symbol, da, db)
        for entry in (spec.get("api") or {}).values():
            if not isinstance(entry, dict):
                continue
            ma, name_a = api_entry(entry, ta)
            mb, name_b = api_entry(entry, tb)
            if mb.split(".")[0] != "vllm":
                continue  # another library's name: not in the vLLM wheel
            fa, fb = resolve_api(wa, ma, name_a), resolve_api(wb, mb, name_b)
            if fa is None and fb is None:
                continue
            if fb is None:
                if wb.module_path(mb) is None:
                    drift.add(BREAKING, GONE_MODULE, mb, "module gone", kind, name_b)
                else:
                    drift.add(BREAKING, GONE, mb, f"{name_b}: no longer importable", kind)
            elif fa is None:
                drift.add(ADDED, OWN, mb, f"{name_b}: added", kind)
            else:
                (pa, node_a), (pb, node_b) = fa, fb
                _definition_changes(
                    drift,
                    kind,
                    pyread.module_of(pb),
                    _def_name(node_b),
                    describe(wa, pa, node_a),
                    describe(wb, pb, node_b),
                )


def _changed_value(key: str, a: object, b: object) -> str:
    """One changed mapping entry: a class that moved module, list entries gained or lost."""
    if isinstance(a, str) and isinstance(b, str) and a.count(":") == b.count(":") == 1:
        (_, ca), (mb, cb) = a.split(":"), b.split(":")
        if ca == cb:
            return f"{key} now in {mb}"
    if isinstance(a, list) and isinstance(b, list):
        sa, sb = {str(v) for v in a}, {str(v) for v in b}
        moved = [f"+{v}" for v in sorted(sb - sa)] + [f"-{v}" for v in sorted(sa - sb)]
        return f"{key} " + (" ".join(moved) if moved else "reordered")
    return f"{key}: {fmt(a)} -> {fmt(b)}"


def diff_builtins(
    drift: Drift, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, a: str, b: str
) -> None:
    """Built-in names of one kind between two wheels: section 3, one entry per table."""
    if old is None and new is None:
        return
    if old is None or new is None:
        section, rank = (ADDED, OWN) if old is None else (BREAKING, GONE_MODULE)
        where = (
            f"present in {b}, absent in {a}" if old is None else f"absent in {b}, present in {a}"
        )
        drift.add(section, rank, f"kind {kind}", f"built-in names: {where}", kind)
        return
    # A name added to or removed from a list field is not repeated for the mappings keyed by it.
    listed: set[str] = set()
    for key in set(old) | set(new):
        va, vb = old.get(key), new.get(key)
        if isinstance(va, list) and isinstance(vb, list):
            listed |= {str(v) for v in va} ^ {str(v) for v in vb}
    for table in sorted(set(old) | set(new)):
        va, vb = old.get(table), new.get(table)
        changed: list[str] = []
        if isinstance(va, dict | list) and isinstance(vb, dict | list):
            skip = listed if isinstance(va, dict) else set()
            ka = {str(k) for k in va} - skip
            kb = {str(k) for k in vb} - skip
            if isinstance(va, dict) and isinstance(vb, dict):
                changed = [
                    _changed_value(k, va[k], vb[k])
                    for k in sorted(set(va) & set(vb))
                    if va[k] != vb[k]
                ]
        else:
            ka = kb = set()
            if va != vb:
                changed = [f"{fmt(va)} -> {fmt(vb)}"]
        pairs = renames(ka - kb, kb - ka)
        removed = sorted(ka - kb - {o for o, _ in pairs})
        added = sorted(kb - ka - {n for _, n in pairs})
        renamed = [f"{o} -> {n}" for o, n in pairs]
        if removed or renamed or changed or added:
            drift.tables.append((kind, table, removed, renamed, changed, added))


def _names(items: Sequence[str], budget: int) -> str:
    """`a, b, c` cut to about `budget` characters, the rest counted."""
    shown: list[str] = []
    for i, item in enumerate(items):
        if shown and sum(len(s) + 2 for s in shown) + len(item) > budget:
            return ", ".join(shown) + f", ... {len(items) - i} more"
        shown.append(item)
    return ", ".join(shown)


def _subjects(subjects: list[str]) -> str:
    full = ", ".join(subjects)
    modules = {s.partition(":")[0] for s in subjects}
    if len(modules) == 1 and len(subjects) > 1 and all(":" in s for s in subjects):
        return f"{modules.pop()}:{{{', '.join(s.partition(':')[2] for s in subjects)}}}"
    if len(subjects) == 1 or len(full) <= 90:
        return full
    modules = [s.partition(":")[0].split(".") for s in subjects]
    common = []
    for parts in zip(*modules, strict=False):
        if len(set(parts)) > 1:
            break
        common.append(parts[0])
    short = [s.partition(":")[2] or s for s in subjects]
    return f"{len(subjects)} in {'.'.join(common)}: {_names(short, 90)}"


def _texts(texts: list[str]) -> str:
    """`x: removed` and `y: added` as `-x`, `+y`; other changes as they are."""
    removed = [t.removesuffix(": removed") for t in texts if t.endswith(": removed")]
    added = [t.removesuffix(": added") for t in texts if t.endswith(": added")]
    rest = [t for t in texts if not t.endswith((": removed", ": added"))]
    parts = [", ".join(f"-{n}" for n in removed)] if removed else []
    parts += [_names([f"+{n}" for n in added], 80)] if added else []
    return "; ".join(parts + rest)


def _wrap(line: str) -> list[str]:
    return textwrap.wrap(
        line, WIDTH, subsequent_indent="      ", break_long_words=False, break_on_hyphens=False
    ) or [line]


def drift_report(catalog: Catalog, drift: Drift, a: str, short: bool) -> list[str]:
    """The report's sections: each change once, under the symbol whose names changed, with the
    kinds whose catalog names it; in `short`, only what needs a decision."""
    by_section: dict[int, list[tuple[tuple[int, ...], str, frozenset[str], list[Change]]]] = {}
    # A member added that is also an added built-in name of one of its kinds (an enum member
    # that is a backend name) is said once, with the built-in names.
    builtin = {(kind, n) for kind, _, _, _, _, added in drift.tables for n in added}
    # A fact's method gone and its class's member list losing it are one change: said once,
    # with the class's guess at what it became.
    for c in list(drift.changes.values()):
        if c.text.endswith(": removed"):
            guessed = [
                o
                for o in drift.changes.values()
                if o.subject == c.subject and o.text.startswith(c.text + " (")
            ]
            if guessed:
                guessed[0].kinds |= c.kinds
                del drift.changes[(c.section, c.subject, c.text)]
    for section in (BREAKING, BEHAVIOUR, ADDED):
        changes = [
            c
            for c in drift.changes.values()
            if c.section == section
            and not any((k, c.text.removesuffix(": added")) in builtin for k in c.kinds)
        ]
        subjects: dict[str, set[str]] = {}
        for c in changes:
            subjects.setdefault(c.text, set()).add(c.subject)
        # One line per set of symbols: the same change of several classes is one line.
        groups: dict[frozenset[str], list[Change]] = {}
        for c in changes:
            groups.setdefault(frozenset(subjects[c.text]), []).append(c)
        rows = []
        for subject_set, group in groups.items():
            kinds = set().union(*(c.kinds for c in group))
            rank = min(c.rank for c in group)
            order = min(catalog.order(k) for k in kinds)
            rows.append(((rank, *order[:1]), sorted(subject_set)[0], subject_set, group))
        by_section[section] = sorted(rows, key=lambda r: (r[0], r[1]))
    # What a class gained beside what it lost is shown with the loss (compute_hash -> ...).
    lost = {r[2]: r for r in by_section[BREAKING]}
    for row in list(by_section[ADDED]):
        if row[2] in lost:
            lost[row[2]][3].extend(row[3])
            by_section[ADDED].remove(row)

    def line(row: tuple[tuple[int, ...], str, frozenset[str], list[Change]]) -> list[str]:
        _, _, subject_set, group = row
        texts = sorted(dict.fromkeys(c.text for c in group), key=lambda t: t.endswith(": added"))
        kinds = sorted(set().union(*(c.kinds for c in group)), key=catalog.order)
        names = set().union(*(c.names for c in group))
        # A class gone takes its methods with it: the class is named, not each method.
        names = sorted(n for n in names if n.rpartition(".")[0] not in names)
        # What was added is said of the class alone (its module is in the sections above or
        # in the catalog); what changed, of the module and class.
        subjects = sorted(subject_set)
        if group[0].section == ADDED:
            subjects = [s.partition(":")[2] or s for s in subjects]
        said = f"  {_subjects(subjects)}: {_texts(texts)}"
        if names:
            said += f" (the catalog names {_names(names, 200)})"
        return _wrap(f"{said} (kinds: {', '.join(kinds)})")

    out: list[str] = []
    for section in (BREAKING, BEHAVIOUR, BUILTINS, ADDED):
        if section == BUILTINS:
            rows = [
                (kind, table, removed, renamed, changed, [] if short else added)
                for kind, table, removed, renamed, changed, added in drift.tables
            ]
            rows = [r for r in rows if any(r[2:])]
            rows.sort(key=lambda r: catalog.order(r[0]))
            lines = []
            for kind, table, removed, renamed, changed, added in rows:
                for budget in range(80, 0, -10):  # the longest that fits in WIDTH
                    parts = [f"-{len(removed)}: {_names(removed, budget)}"] if removed else []
                    parts += [f"renamed? {_names(renamed, budget)}"] if renamed else []
                    parts += (
                        [f"changed {len(changed)}: {_names(changed, budget)}"] if changed else []
                    )
                    parts += [f"+{len(added)}: {_names(added, budget)}"] if added else []
                    said = f"{table}: " + "; ".join(parts)
                    if len(said) + len(kind) + 3 <= WIDTH:
                        break
                # One line per kind and table; a kind's tables share a line where they fit.
                if lines and lines[-1].startswith(f"  {kind} ") and len(lines[-1] + said) < WIDTH:
                    lines[-1] += f" | {said}"
                else:
                    lines.append(f"  {kind} {said}")
            lines = [wrapped for said in lines for wrapped in _wrap(said)]
            title = SECTIONS[BUILTINS] + (" (removed, renamed, changed)" if short else "")
            count = len(rows)
        else:
            if short and section == ADDED:
                continue
            lines = [text for row in by_section[section] for text in line(row)]
            title, count = SECTIONS[section].format(a=a), len(by_section[section])
        out.append(f"{section if section < ADDED else 4}. {title} ({count})")
        out += lines
    return out


def cmd_diff(catalog: Catalog, ref_a: str, ref_b: str, short: bool = False) -> int:
    old, new = open_ref(catalog, ref_a), open_ref(catalog, ref_b)
    (a, wa, _), (b, wb, _) = old, new
    drift = Drift()
    (fa, ea), (fb, eb) = extract_each(wa, list(RECIPES)), extract_each(wb, list(RECIPES))
    for kind, error in [*ea.items(), *eb.items()]:
        drift.add(BREAKING, GONE_MODULE, f"kind {kind}", error.split(": ", 1)[1], kind)
    for kind in RECIPES:
        if kind in fa and kind in fb:
            diff_builtins(drift, kind, fa[kind], fb[kind], a, b)
    diff_catalog(catalog, old, new, drift)
    changed = {k for c in drift.changes.values() for k in c.kinds} | {t[0] for t in drift.tables}
    same = [k for k in catalog.kinds if k not in changed]
    head = (
        f"vLLM drift {a} ({wa.distribution} {wa.version}) -> {b} ({wb.distribution} {wb.version})"
    )
    if not changed:
        print(f"{head}: no drift")
        return 0
    print(
        f"{head}{' (short: what needs a decision)' if short else ''}: {len(changed)} kinds"
        f" changed, {len(same)} did not ({', '.join(same) or '-'})"
    )
    for line in drift_report(catalog, drift, a, short):
        print(line)
    return 0


# -- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--catalog",
        type=Path,
        default=DEFAULT_CATALOG,
        help="the extensions/ folder (default: this repo's)",
    )
    parser = argparse.ArgumentParser(
        prog="python -m tools.vllm_facts", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("extract", parents=[common], help="write extensions/<kind>/builtins.json")
    p.add_argument(
        "--target",
        action="append",
        help="a target in vllm.yml (repeatable; default: all)",
    )
    p = sub.add_parser("check", parents=[common], help="check kind.yml facts/api and builtins.json")
    p.add_argument(
        "--target",
        action="append",
        help="a target in vllm.yml (repeatable; default: all)",
    )
    p.add_argument("--wheel", help="check this wheel file instead of the targets' wheels")
    p.add_argument(
        "--as",
        dest="as_target",
        help="the target the --wheel stands for (default: latest)",
    )
    p.add_argument(
        "--no-render",
        dest="render",
        action="store_false",
        help="skip rendering a plugin of every kind per target (copier copy of this checkout)",
    )
    p.add_argument(
        "--loaders",
        action="store_true",
        help="run the all-kinds package's loader tier in each target's real vLLM"
        " (tests/test_real_vllm.py; builds the environments of tests/realvllm/envs.py)",
    )
    p = sub.add_parser("diff", parents=[common], help="drift between two targets or wheel files")
    p.add_argument("old", metavar="FROM")
    p.add_argument("new", metavar="TO")
    p.add_argument(
        "--short",
        action="store_true",
        help="only what needs a decision: what breaks, what behaves differently, built-in names"
        " removed, renamed or changed",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        catalog = load_catalog(args.catalog)
        targets = (
            [str(t) for t in args.target]
            if getattr(args, "target", None)
            else list(catalog.targets)
        )
        unknown = [t for t in targets if t not in catalog.targets]
        if unknown:
            raise FactsError(
                f"unknown target(s) {', '.join(unknown)}; vllm.yml has {', '.join(catalog.targets)}"
            )
        if args.command == "extract":
            return cmd_extract(catalog, targets)
        if args.command == "check":
            return cmd_check(
                catalog, targets, args.wheel, args.as_target, args.render, args.loaders
            )
        return cmd_diff(catalog, args.old, args.new, args.short)
    except FactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
