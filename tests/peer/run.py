"""The peer tier's machinery (tests/test_peer.py): plan, prepare, run, compare, document.

For one target: `plan()` reads tests/peer/adaptations.yml against the test files of the
target's sdist (tests/peer/sources.py) and says which files run in which group, what is
excluded and why; `prepare()` writes a run folder per side and group (vLLM's conftest and
helpers, the test files with their edits, the stand-in fixtures, peer_inner.py); `execute()`
runs one pytest there in the vLLM environment with the side's packages on PYTHONPATH;
`compare()` is the tier's rule: every test the baseline passes, the generated run passes.

    python -m tests.peer.run docs      # docs/peer-tier.md from the last results of each target
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import sources

PEER = Path(__file__).resolve().parent
ROOT = PEER.parents[1]
ADAPTATIONS = PEER / "adaptations.yml"
RESULTS = sources.CACHE / "peer" / "results"
DOCS = ROOT / "docs" / "peer-tier.md"
SIDES = ("baseline", "generated")
# The machine-wide serve lock of tier 3 (tests/serve/runner.py): one engine at a time.
SERVE_LOCK = Path("/tmp/vllm-plugin-template-serve.lock")
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
# vLLM's tests need these beside the environment's pytest; versions as vLLM's own test
# requirements pin them (requirements/test/cpu.txt of the sdist).
TEST_TOOLS = ["pytest-asyncio", "tblib"]
INNER_TIMEOUT = 1500  # seconds for one side's pytest of one group, serve-lock waits included
PLACEHOLDER = re.compile(r"\{(package|PACKAGE|entry_point:[A-Za-z0-9_.]+)\}")


def load() -> dict[str, Any]:
    return yaml.safe_load(ADAPTATIONS.read_text())


def inventory(src: Path) -> list[str]:
    """Every test file of the sdist's tests/plugins_tests/, relative to that folder."""
    base = src / "tests" / "plugins_tests"
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("test_*.py"))


@dataclass
class FilePlan:
    path: str  # relative to tests/plugins_tests/
    spec: dict[str, Any]
    excluded: str | None  # the whole file's reason, or None when it runs
    exclude: dict[str, str] = field(default_factory=dict)  # test -> reason (both sides)
    engine: list[str] = field(default_factory=list)  # run under the serve lock

    @property
    def group(self) -> str:
        return self.spec.get("group", "main")


@dataclass
class Plan:
    target: str
    files: list[FilePlan]
    problems: list[str]  # unlisted or stale files: the tier fails on them

    def running(self, group: str | None = None) -> list[FilePlan]:
        return [f for f in self.files if not f.excluded and group in (None, f.group)]

    @property
    def groups(self) -> list[str]:
        return sorted({f.group for f in self.running()})


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on `base` (a file's `targets` entry on the file): mappings merged, `replace`
    lists concatenated, null drops the key, anything else replaced."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        elif k == "replace" and isinstance(out.get(k), list):
            out[k] = [*out[k], *v]
        else:
            out[k] = v
    return out


def plan(
    adapt: dict[str, Any],
    src: Path,
    target: str,
    serves: bool,
    everything: bool = False,
    elsewhere: str = "",
) -> Plan:
    """What runs for `target`: `serves`, whether its `engine` tests run (where its vLLM starts
    an engine on this machine); `elsewhere`, why they do not where it does; `everything` runs
    the tests listed `costly` too ($VPT_PEER_ALL=1)."""
    present = inventory(src)
    listed = adapt["files"]
    problems = [
        f"{p}: a vLLM test file that adaptations.yml does not list (run it or exclude it)"
        for p in present
        if p not in listed
    ] + [
        f"{p}: listed in adaptations.yml, not in this sdist (absent there? `targets: "
        f"{{{target}: {{absent: true}}}}`)"
        for p, spec in listed.items()
        if p not in present and not ((spec.get("targets") or {}).get(target) or {}).get("absent")
    ]
    files = []
    for path in present:
        if path not in listed:
            continue
        spec = listed[path]
        spec = _merge(spec, (spec.get("targets") or {}).get(target, {}))
        fp = FilePlan(path, spec, spec.get("excluded"))
        if not fp.excluded:
            fp.exclude = dict(spec.get("exclude") or {})
            for name in spec.get("engine") or []:
                if not serves:
                    fp.exclude.setdefault(name, " ".join((elsewhere or adapt["no_engine"]).split()))
            if not everything:
                for name, why in (spec.get("costly") or {}).items():
                    why = f"costly, runs with VPT_PEER_ALL=1: {' '.join(why.split())}"
                    fp.exclude.setdefault(name, why)
            fp.engine = [n for n in spec.get("engine") or [] if n not in fp.exclude]
        files.append(fp)
    return Plan(target, files, problems)


def answers(fp: FilePlan, target: str) -> dict[str, Any] | None:
    spec = fp.spec.get("answers")
    return None if spec is None else {**spec, "vllm_target": target}


def _package_key(fp: FilePlan, target: str) -> str:
    return json.dumps([answers(fp, target), fp.spec.get("edit")], sort_keys=True)


def entry_points(project: Path) -> dict[str, dict[str, str]]:
    data = tomllib.loads((project / "pyproject.toml").read_text())
    return data["project"].get("entry-points", {})


def context(project: Path) -> dict[str, str]:
    """The placeholders' values for a generated project."""
    ctx_answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    package = ctx_answers["package_name"]
    ctx = {"package": package, "PACKAGE": package.upper()}
    for group, names in entry_points(project).items():
        ctx[f"entry_point:{group}"] = next(iter(names)) if len(names) == 1 else f"<{len(names)}>"
    return ctx


def fill(text: str, ctx: dict[str, str] | None, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        if ctx is None or m.group(1) not in ctx or ctx[m.group(1)].startswith("<"):
            raise ValueError(f"{where}: no value for {m.group(0)} (generated package: {ctx})")
        return ctx[m.group(1)]

    return PLACEHOLDER.sub(one, text)


def edit_text(text: str, edits: dict[str, Any], ctx: dict[str, str] | None, where: str) -> str:
    """One side's edits (replace, prepend, append) of a test file; each OLD must occur."""
    for old, new in edits.get("replace") or []:
        if old not in text:
            raise ValueError(f"{where}: {old!r} does not occur (adaptations.yml is stale)")
        text = text.replace(old, fill(new, ctx, where))
    if edits.get("prepend"):
        lines = text.splitlines(keepends=True)
        at = 0
        while at < len(lines) and lines[at].startswith("#"):
            at += 1
        text = "".join([*lines[:at], fill(edits["prepend"], ctx, where), *lines[at:]])
    if edits.get("append"):
        text += fill(edits["append"], ctx, where)
    return text


def generated_projects(
    plan_: Plan, rendered: Any, workdir: Path
) -> tuple[dict[str, Path], dict[str, str]]:
    """({package key: project}, {package key: why it was not generated}) of the generated
    packages the running files need: rendered with the session's shared renders, copied first
    where the file edits the package. A refused answer is the template's failure: the files
    that need that package do not run in the generated run."""
    out: dict[str, Path] = {}
    refused: dict[str, str] = {}
    for fp in plan_.running():
        data = answers(fp, plan_.target)
        if data is None:
            continue
        key = _package_key(fp, plan_.target)
        if key in out or key in refused:
            continue
        try:
            project = rendered(**data)
        except Exception as e:  # a refused answer (its last line is the reason), a Jinja error
            refused[key] = f"rendering {json.dumps(data)} failed: {str(e).splitlines()[-1]}"
            continue
        edit = fp.spec.get("edit")
        if edit:
            copy = workdir / f"edited-{len(out)}-{project.name}"
            shutil.copytree(project, copy)
            target = copy / fill(edit["path"], context(copy), fp.path)
            if not target.is_file():
                raise ValueError(f"{fp.path}: edit of {edit['path']}: no {target}")
            target.write_text(target.read_text() + fill(edit["append"], context(copy), fp.path))
            project = copy
        out[key] = project
    return out, refused


HELPERS = [m for m in sources.MEMBERS if not m.startswith("tests/plugins")]


def prepare(
    side: str,
    group: str,
    plan_: Plan,
    adapt: dict[str, Any],
    src: Path,
    projects: dict[str, Path],
    dest: Path,
) -> list[str]:
    """The run folder of one side and group; returns the test paths to give pytest."""
    for member in HELPERS:
        (dest / member).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / member, dest / member)
    tests = src / "tests" / "plugins_tests"
    for init in tests.rglob("__init__.py"):
        (dest / "tests" / "plugins_tests" / init.relative_to(tests)).parent.mkdir(
            parents=True, exist_ok=True
        )
        shutil.copy(init, dest / "tests" / "plugins_tests" / init.relative_to(tests))
    shutil.copy(PEER / "inner.py", dest / "peer_inner.py")
    fixtures = "".join(
        f"\n\n@pytest.fixture\ndef {name}(request):\n    return {expr}\n"
        for name, expr in (adapt.get("fixtures") or {}).items()
    )
    (dest / "tests" / "plugins_tests" / "conftest.py").write_text(
        '"""Stand-ins of the peer tier (tests/peer/adaptations.yml, fixtures) for fixtures of\n'
        'vLLM\'s tests/conftest.py that download from the hub."""\n\n'
        "import os  # noqa: F401\n\nimport peer_inner  # noqa: F401\nimport pytest\n" + fixtures
    )
    paths = []
    # Files that must not see what earlier files did in the process first (runs_first).
    for fp in sorted(plan_.running(group), key=lambda f: not f.spec.get("runs_first")):
        if (
            side == "generated"
            and fp.spec.get("answers")
            and _package_key(fp, plan_.target) not in projects
        ):
            continue  # its package was not generated (generated_projects)
        text = (tests / fp.path).read_text()
        text = edit_text(text, fp.spec.get("both") or {}, None, f"{fp.path} (both)")
        if side == "generated":
            key = _package_key(fp, plan_.target)
            ctx = context(projects[key]) if key in projects else None
            text = edit_text(text, fp.spec.get("generated") or {}, ctx, f"{fp.path} (generated)")
        out = dest / "tests" / "plugins_tests" / fp.path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        paths.append(f"tests/plugins_tests/{fp.path}")
    return paths


def _run(cmd: list[Any], env: dict[str, str] | None = None, **kw: Any) -> None:
    proc = subprocess.run(
        [str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=900, **kw
    )
    if proc.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def pinned_tools(venv: Any, src: Path) -> Path:
    """pytest-asyncio and tblib as vLLM pins them, installed once per environment into a
    cached folder (the cached vLLM environment itself is never modified)."""
    from realvllm import envs

    pins = sources.pinned(src, TEST_TOOLS)
    tag = hashlib.sha256(" ".join(pins).encode()).hexdigest()[:10]
    dest = sources.CACHE / "peer" / f"tools-{venv.id}-{tag}"
    pip = [venv.python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    cmd = [*pip, "--no-deps", "--target", dest, *pins]
    return _built_once(dest, lambda: _run(cmd, env=envs.isolated_pip_env()))


def _built_once(dest: Path, build: Any) -> Path:
    """`dest`, built by `build()` unless a ready marker says it was: under a lock, since the
    xdist workers (and other sessions) share the cache."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".lock-{dest.name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".ready").is_file():
            shutil.rmtree(dest, ignore_errors=True)
            build()
            (dest / ".ready").write_text("ok\n")
    return dest


# Bump when inner.build_tiny changes.
TINY_RECIPE = "t1"


def group_env(adapt: dict[str, Any], group: str, serves: bool) -> dict[str, str]:
    """The environment both sides of `group` run with (adaptations.yml groups)."""
    spec = adapt["groups"].get(group) or {}
    return {
        **(spec.get("env") or {}),
        **({} if serves else spec.get("env_without_cpu_build") or {}),
    }


def tiny_checkpoints(venv: Any, project: Path) -> dict[str, str]:
    """The stand-in checkpoints (peer_inner.tiny), built once per version of the test kit's
    pytest_vllm_plugin.tiny (and TINY_RECIPE), cached; returns their environment variables.
    `project`: the render whose tests use them (the kit's module builds them, by path)."""
    script = ROOT / "kit" / "src" / "pytest_vllm_plugin" / "tiny.py"
    tag = hashlib.sha256(script.read_bytes() + TINY_RECIPE.encode()).hexdigest()
    dest = sources.CACHE / "peer" / f"tiny-{tag[:12]}"
    cmd = [venv.python, PEER / "inner.py", "tiny", dest, script]
    _built_once(dest, lambda: _run(cmd, env=dict(os.environ, **BASE_ENV)))
    return {f"PEER_TINY_{k.upper()}": str(dest / k) for k in ("llama", "opt")}


@dataclass
class SideResult:
    side: str
    seconds: float
    outcomes: dict[str, str]
    details: dict[str, str]
    deselected: dict[str, str]
    collect_errors: dict[str, str]
    unmatched: dict[str, list[str]]
    durations: dict[str, float]
    output: str
    cached: bool = False
    lock_waits: dict[str, float] = field(default_factory=dict)


def group_plan(plan_: Plan, group: str) -> dict[str, Any]:
    """What peer_inner deselects (with the reason) and runs under the serve lock."""
    running = plan_.running(group)
    return {
        "exclude": {f.path: f.exclude for f in running if f.exclude},
        "lock": {f.path: {n: True for n in f.engine} for f in running if f.engine},
    }


def execute(
    venv: Any,
    side: str,
    group: str,
    plan_: Plan,
    paths: list[str],
    rundir: Path,
    pythonpath: list[Path],
    extra_env: dict[str, str],
) -> SideResult:
    """One pytest of vLLM's tests in `rundir`, in the vLLM environment `venv`."""
    started = time.monotonic()
    planfile = rundir / "peer-plan.json"
    report = rundir / "peer-report.json"
    planfile.write_text(
        json.dumps(
            {**group_plan(plan_, group), "lock_path": str(SERVE_LOCK), "report": str(report)},
            indent=1,
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "PYTHON", "PIP_"))}
    env.update(BASE_ENV)
    env.update(extra_env)
    env["PATH"] = f"{venv.bin}{os.pathsep}{env.get('PATH', '')}"  # `vllm serve` of the env
    env["PYTHONPATH"] = os.pathsep.join(map(str, [*pythonpath, rundir]))
    env["PEER_PLAN"] = str(planfile)
    cmd = [
        venv.python, "-m", "pytest", "-p", "peer_inner", "-p", "no:cacheprovider",
        "-q", "-rfEs", "--rootdir", rundir, *paths,
    ]  # fmt: skip
    # Its own session: on a timeout the whole group goes (engine cores, a `vllm serve`).
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        cwd=rundir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=INNER_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        raise RuntimeError(
            f"{side}/{group}: over {INNER_TIMEOUT} s, stopped:\n{output[-6000:]}"
        ) from None
    finally:
        with contextlib.suppress(ProcessLookupError):  # anything the tests left behind
            os.killpg(proc.pid, signal.SIGKILL)
    if not report.is_file():
        raise RuntimeError(
            f"{side}/{group}: pytest wrote no report ({proc.returncode}):\n{output[-6000:]}"
        )
    data = json.loads(report.read_text())
    (rundir / "pytest-output.txt").write_text(output)
    return SideResult(
        side,
        time.monotonic() - started,
        data["outcomes"],
        data["details"],
        data["deselected"],
        data["collect_errors"],
        data["unmatched"],
        data["durations"],
        output,
        lock_waits=data.get("lock_waits", {}),
    )


# ------------------------------------------------------------------------ baseline cache
#
# The baseline depends on vLLM only (its sdist, the environment, the run folder: vLLM's tests
# as edited for both sides, the stand-ins, the plan), never on the template: it is run once
# per distinct input and its result reused, so a warm run spends its time on the generated
# side. $VPT_PEER_BASELINE=fresh runs it again (and stores the new result).
BASELINES = sources.CACHE / "peer" / "baseline"


def baseline_key(rundir: Path, *parts: object) -> str:
    digest = hashlib.sha256()
    for f in sorted(rundir.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            digest.update(f.relative_to(rundir).as_posix().encode() + b"\0" + f.read_bytes())
    digest.update(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def cached_baseline(target: str, group: str, key: str) -> SideResult | None:
    path = BASELINES / f"{target}-{group}-{key}.json"
    if os.environ.get("VPT_PEER_BASELINE") == "fresh" or not path.is_file():
        return None
    data = json.loads(path.read_text())
    return SideResult(**{**data, "output": f"(cached: {path})", "cached": True})


def store_baseline(target: str, group: str, key: str, result: SideResult) -> None:
    BASELINES.mkdir(parents=True, exist_ok=True)
    data = {**result.__dict__, "output": result.output[-4000:]}
    tmp = BASELINES / f".{target}-{group}-{key}.{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.rename(BASELINES / f"{target}-{group}-{key}.json")


def strip_path(nodeid: str) -> str:
    return nodeid.replace("tests/plugins_tests/", "", 1)


def compare(baseline: dict[str, str], generated: dict[str, str]) -> dict[str, list[str]]:
    """The tier's rule: what the baseline passes, the generated run passes."""
    both = sorted(set(baseline) | set(generated))
    return {
        "baseline_only": [
            t for t in both if baseline.get(t) == "passed" and generated.get(t) != "passed"
        ],
        "generated_only": [
            t for t in both if generated.get(t) == "passed" and baseline.get(t) != "passed"
        ],
    }


def save(target: str, result: dict[str, Any]) -> Path:
    """The run's record: TARGET.json, or TARGET-all.json for a run with VPT_PEER_ALL=1."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{target}{'-all' if result.get('all') else ''}.json"
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return out


# ------------------------------------------------------------------------------ docs

INTRO = """\
<!-- GENERATED by `python -m tests.peer.run docs` from tests/peer/adaptations.yml and the
     last peer-tier results (~/.cache/vllm-plugin-template/peer/results/): do not edit. -->

# The peer tier

`tests/test_peer.py` (marker `peer`, part of `.ci/run`) runs vLLM's own
`tests/plugins_tests`, taken from the vLLM source distribution of each target on the
package index (`tests/peer/sources.py`: the PEP 691 JSON simple API, the sha256 it gives,
cached under `~/.cache/vllm-plugin-template/sdist/vllm-VERSION/`, never copied into this
repository), twice per target, in the target's real vLLM:

- the **baseline**: vLLM's own dummy plugin packages (`tests/plugins/`) installed;
- the **generated** run: generated packages installed in their place, the tests adapted.

The rule: **every test that passes in the baseline passes in the generated run.** A test
that passes only with vLLM's dummy fails the tier and is the template's fault; one that
fails on both sides is vLLM's or this machine's (the table gives its error). Each side of a
group of test files is one pytest process (`tests/peer/inner.py` is its plugin); vLLM's
`tests/conftest.py` and `tests/utils.py` are used as they are, with pytest-asyncio and
tblib pinned as vLLM's `requirements/test/cpu.txt` pins them.

Everything adapted is data in one file, `tests/peer/adaptations.yml`: per vLLM test file the
dummy it uses, the copier answers of the generated package standing in for it, the edits of
the test (both sides: offline stand-ins for the hub; generated side: the generated
package's import paths and entry-point names), and what is not run, with the reason. A test
not run is deselected on both sides, its reason printed in the inner run's summary and in
the session's warnings summary (`PeerExcluded`); a vLLM test file the data does not list,
or an edit or exclusion that no longer matches vLLM's file, fails the tier.

The baseline depends on vLLM alone, so its result is cached by everything it depends on
(vLLM's files as edited, the environment, the stand-ins, the plan): a warm run runs the
generated side only. `VPT_PEER_BASELINE=fresh` runs the baseline again; `VPT_PEER_ALL=1`
also runs the tests listed as costly. This page comes from real runs: `VPT_PEER_ALL=1
VPT_PEER_BASELINE=fresh pytest tests/test_peer.py` (the tables: every test that can run
here, both sides measured), `pytest tests/test_peer.py` twice (as in CI: the second one
warm, its baseline cached), then `python -m tests.peer.run docs`.
"""


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    return "`" + _cell(text).replace("`", "'") + "`"


def _edits(spec: dict[str, Any], side: str) -> list[str]:
    edits = spec.get(side) or {}
    out = [f"{_code(old)} → {_code(new)}" for old, new in edits.get("replace") or []]
    for where in ("prepend", "append"):
        if edits.get(where):
            out.append(f"{where}s {_code(edits[where])}")
    return out


def _adaptations(adapt: dict[str, Any]) -> list[str]:
    lines = [
        "## Adaptations",
        "",
        "Both sides: `facebook/opt-125m` is the template's tiny offline checkpoint (the",
        "test kit's `pytest_vllm_plugin.tiny`); fixtures of vLLM's conftest",
        "stand in as follows (`tests/plugins_tests/conftest.py` of each run):",
        "",
    ]
    for name, expr in (adapt.get("fixtures") or {}).items():
        lines.append(f"- `{name}`: {_code(expr)}")
    lines += [
        "",
        "Groups of test files (one pytest process per side each) and their environment:",
        "",
    ]
    labels = {
        "env": "both sides",
        "env_without_cpu_build": "both sides, where the target's vLLM has no CPU build",
        "generated_env": "the generated side",
    }
    for name, spec in adapt["groups"].items():
        parts = [
            f"{labels[k]}: " + ", ".join(f"`{var}={val}`" for var, val in env.items())
            for k, env in (spec or {}).items()
        ]
        lines.append(f"- `{name}`: {'; '.join(parts) or 'nothing added'}")
    lines += [
        "",
        "| vLLM test file | vLLM's dummy | generated stand-in (answers) | edits: both sides; "
        "generated side |",
        "|---|---|---|---|",
    ]
    for path, spec in adapt["files"].items():
        if spec.get("excluded"):
            continue
        answers = {k: v for k, v in (spec.get("answers") or {}).items() if k != "project_name"}
        dummy = ", ".join(f"`{d}`" for d in spec.get("dummy") or []) or "none (in the test)"
        stand_in = _code(json.dumps(answers, separators=(", ", ": "))) if answers else "none"
        for t, over in (spec.get("targets") or {}).items():
            if "answers" in over:
                stand_in += f"; on {t}: {_code(json.dumps(over['answers']))}"
        both = _edits(spec, "both")
        generated = _edits(spec, "generated")
        for t, over in (spec.get("targets") or {}).items():
            generated += [f"on {t}: {e}" for e in _edits(over, "generated")]
        if spec.get("runs_first"):
            both.append(f"runs first in its group: {_cell(spec['runs_first'])}")
        if spec.get("engine"):
            names = ", ".join(f"`{n}`" for n in spec["engine"])
            both.append(
                f"starts an engine: {names} (under the serve lock, only where the target "
                "serves on CPU)"
            )
        if spec.get("edit"):
            generated.append(
                f"appends to the generated {_code(spec['edit']['path'])}: the dummy model's "
                "`compute_logits` (always token 0), as an author edits their module"
            )
        lines.append(
            f"| `{path}` | {dummy} | {stand_in} | {'; '.join(both) or 'none'}<br>generated: "
            f"{'; '.join(generated) or 'none'} |"
        )
    return [*lines, ""]


def _timing(res: dict[str, Any]) -> str:
    secs = res["seconds"]
    cached = " (its cached result)" if secs.get("baseline_cached") else ""
    mode = "with VPT_PEER_ALL=1" if res.get("all") else "as in CI"
    return (
        f"{res['date']}, {mode}: baseline {secs['baseline']:.0f} s{cached}, generated "
        f"{secs['generated']:.0f} s (installs and pytest, {secs.get('lock_wait', 0):.0f} s of "
        f"it waiting for the serve lock), before them {secs.get('prepare', 0):.0f} s (renders, "
        "tools, checkpoints)"
    )


def docs(results: dict[str, dict[str, Any]], adapt: dict[str, Any]) -> str:
    """The page, from the records of each target: the table from the VPT_PEER_ALL=1 run
    where there is one (every test that can run here), the timings of both kinds of run."""
    lines = [INTRO.rstrip(), "", *_adaptations(adapt)]
    targets = sorted({t.removesuffix("-all") for t in results}, key=lambda t: t.split("."))
    for target in targets:
        res = results.get(f"{target}-all") or results[target]
        runs = [results[k] for k in (f"{target}-all", target) if k in results]
        lines += [
            f"## Target {target}: vLLM {res['vllm']} (`{res['wheel']}`)",
            "",
            *[f"- Run {_timing(r)}." for r in runs],
            "",
            "| vLLM test | baseline | generated | why not run, or the error |",
            "|---|---|---|---|",
        ]
        for file, info in res["files"].items():
            if info.get("excluded"):
                lines.append(
                    f"| `{file}` (every test) | not run | not run | {_cell(info['excluded'])} |"
                )
                continue
            for test in info["tests"]:
                row = res["tests"][test]
                if "excluded" in row:
                    lines.append(f"| `{test}` | not run | not run | {_cell(row['excluded'])} |")
                    continue
                errors = {row.get(f"{s}_error") for s in SIDES} - {None, ""}
                note = "; ".join(_code(e) for e in sorted(errors))
                if row.get("costly"):
                    note = "; ".join(filter(None, [f"costly: {row['costly']}", note]))
                lines.append(f"| `{test}` | {row['baseline']} | {row['generated']} | {note} |")
        verdict = res["verdict"]
        lines.append("")
        if verdict["baseline_only"]:
            only = ", ".join(f"`{t}`" for t in verdict["baseline_only"])
            lines.append(f"**Passes with vLLM's dummy only (the tier fails):** {only}.")
        else:
            lines.append("Every test the baseline passes, the generated run passes.")
        if verdict["generated_only"]:
            only = ", ".join(f"`{t}`" for t in verdict["generated_only"])
            lines += ["", f"Passes in the generated run only: {only}."]
        lines.append("")
    return "\n".join(lines)


def write_docs() -> Path:
    results = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    if not results:
        raise SystemExit(f"no results in {RESULTS}: run `pytest -m peer tests/test_peer.py` first")
    DOCS.write_text(docs(results, load()))
    return DOCS


if __name__ == "__main__":
    if sys.argv[1:] == ["docs"]:
        print(write_docs())
    else:
        raise SystemExit("usage: python -m tests.peer.run docs")
