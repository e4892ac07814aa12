"""How the suite's tests are spread over its xdist workers (pyproject.toml: `-n 3`).

What bounds a run on 2 cores is the engine work: every `vllm serve`, and every vLLM engine
that the peer tier and the Ray test start, holds the machine-wide serve lock
(tests/serve/runner.py), so those run one after the other whatever the number of workers.
So one worker (gw0) runs the engine units, costliest first, one after the other, and the
others run everything else, costliest first, at a lower CPU priority (`nice`, conftest.py):
the serves start at the speed of an idle machine and the rest of the suite takes the CPU
they leave (a serve's start is mostly one process importing vLLM on one core; installs and
renders wait on the disk). When one side runs out, its workers take the other side's units.

- a unit (what one worker runs from start to end) is a test of a module in SPLIT, or the
  tests of such a module that share an expensive module fixture, or else a whole module;
- a unit's cost is what its tests took in the last run on this machine (DURATIONS, written
  at the end of every run), else in the run recorded in the repository (MEASURED, a warm run
  on 2 cores: `cp ~/.cache/vllm-plugin-template/durations.json tests/durations.json` after a
  full run refreshes it), else a default by side;
- a worker takes its next unit only when it is down to its last test (xdist's prefetch of
  up to three tests ties long units to one worker while another idles).

The controller sees test ids only (pytest 9 ignores the `@group` ids of xdist's loadgroup),
so units are named from the module and the test's name; `check` fails the collection when
the tables below no longer match the tests' marks and fixtures.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tools.wheelsrc import cache_root, write_atomic

DURATIONS = cache_root() / "durations.json"
# The modules whose tests hold the serve lock (their tests are marked serve or peer); of a
# module in ENGINE_ONLY_FOR, only the parametrizations named there (the peer tier starts
# engines in some targets only: conftest.py fills it in).
ENGINE = {"test_serve.py", "test_peer.py", "test_ray.py"}
ENGINE_ONLY_FOR: dict[str, set[str]] = {}
# Modules split into one unit per test, except the tests that use a module fixture named
# here (a serve several tests read, a render), which stay together in one unit.
SPLIT: dict[str, dict[str, set[str]]] = {
    "test_serve.py": {
        "builtin": {
            "test_builtin_serve_runs_the_general_plugin_in_every_process",
            "test_endpoint_absent_without_vllm_plugins",
            "test_generated_smoke_test_of_a_plugin_with_every_kind",
            "test_tensor_parallel_2_runs_the_plugin_in_both_workers",
        }
    },
    "test_peer.py": {},
    "test_real_vllm.py": {"range_package": {"test_range_example_passes_in_each_release"}},
    "test_real_vllm_models.py": {},
    "test_real_vllm_patches.py": {},
    "test_ownership.py": {},
    "test_render.py": {},
    "test_real_vllm_duplicates.py": {},
}
MEASURED = Path(__file__).with_name("durations.json")
DEFAULT = {"engine": 150.0, "work": 30.0}  # seconds of a unit none of whose tests ran yet
ENGINE_WORKER = "gw0"
NICE = 10  # the other workers' CPU priority while the engine worker runs engine units

# What `scheduler` below uses of xdist's LoadScopeScheduling that xdist does not document:
# pyproject.toml pins pytest-xdist to the one version this was tested with.
XDIST_PRIVATE = ["_split_scope", "_reschedule", "_assign_work_unit", "_pending_of"]
XDIST_STATE = ["workqueue", "assigned_work"]  # set by its __init__


def check_xdist() -> None:
    """The installed pytest-xdist is pyproject.toml's pin and has what `scheduler` overrides;
    else one line says so (at import: the whole suite stops)."""
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    test = project["optional-dependencies"]["test"]
    pin = next(r for r in test if r.startswith("pytest-xdist"))
    installed = version("pytest-xdist")
    init = inspect.getsource(LoadScopeScheduling.__init__)
    missing = [m for m in XDIST_PRIVATE if not callable(getattr(LoadScopeScheduling, m, None))]
    missing += [a for a in XDIST_STATE if not re.search(rf"self\.{a}\b *[:=]", init)]
    if pin != f"pytest-xdist=={installed}" or missing:
        lacks = f", whose LoadScopeScheduling lacks {', '.join(missing)}" if missing else ""
        raise ImportError(
            f"tests/scheduling.py overrides private parts of pytest-xdist, tested with {pin}"
            f" (pyproject.toml); this environment has pytest-xdist {installed}{lacks}:"
            " pip install -e '.[test]'"
        )


check_xdist()


def lower_priority(nodeid: str) -> None:
    """In a worker other than the engine worker, about to run a test that is not an engine's:
    that worker and what it starts from now on yield the CPU to the serves."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and worker != ENGINE_WORKER and unit_of(nodeid).startswith("work:"):
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), NICE))


def unit_of(nodeid: str) -> str:
    """`engine:` or `work:`, then the unit's name."""
    path, _, rest = nodeid.partition("::")
    module = path.rsplit("/", 1)[-1]
    param = rest.partition("[")[2].removesuffix("]")
    engine = module in ENGINE and param in ENGINE_ONLY_FOR.get(module, {param})
    tier = "engine" if engine else "work"
    if module not in SPLIT:
        return f"{tier}:{module}"
    test = rest.split("[", 1)[0]
    shared = [name for name, tests in SPLIT[module].items() if test in tests]
    return f"{tier}:{module}:{shared[0]}" if shared else f"{tier}:{nodeid}"


def check(items: list[pytest.Item]) -> None:
    """The tables above against the collected tests."""
    problems = []
    for item in items:
        module = item.path.name
        engine = any(item.iter_markers("serve")) or any(item.iter_markers("peer"))
        if engine != (module in ENGINE):
            problems.append(f"{item.nodeid}: marked serve/peer is {engine}, ENGINE says not")
        name = getattr(item, "originalname", item.name)
        for fixture, tests in SPLIT.get(module, {}).items():
            if (fixture in getattr(item, "fixturenames", ())) != (name in tests):
                problems.append(f"{item.nodeid}: uses {fixture} is not what SPLIT says")
    if problems:
        raise pytest.UsageError("tests/scheduling.py:\n  " + "\n  ".join(problems))


def _read(path: Path) -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def _load() -> dict[str, float]:
    """Each test's seconds: this machine's last run, else the repository's record."""
    return _read(MEASURED) | _read(DURATIONS)


def record(stats: dict[str, list[Any]]) -> None:
    """The seconds each test of this run took (setup, call, teardown), merged into DURATIONS."""
    seen: dict[str, float] = {}
    for reports in stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown"):
                seen[report.nodeid] = seen.get(report.nodeid, 0.0) + report.duration
    if not seen:
        return
    merged = _read(DURATIONS) | {k: round(v, 2) for k, v in seen.items()}
    write_atomic(DURATIONS, json.dumps(merged, indent=0, sort_keys=True))


def scheduler(config: pytest.Config, log: Any) -> Any:
    known = _load()

    class EngineFirst(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _cost(self, scope: str) -> float:
            timed = [known[n] for n in self.workqueue[scope] if n in known]
            if not timed:
                return DEFAULT[scope.partition(":")[0]]
            return sum(timed) * len(self.workqueue[scope]) / len(timed)

        def _reschedule(self, node: Any) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
            elif self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)

        def _assign_work_unit(self, node: Any) -> None:
            ranked = sorted(self.workqueue, key=lambda scope: -self._cost(scope))
            engine = [s for s in ranked if s.startswith("engine:")]
            rest = [s for s in ranked if not s.startswith("engine:")]
            mine = engine + rest if node.gateway.id == ENGINE_WORKER else rest + engine
            self.workqueue.move_to_end(mine[0], last=False)
            super()._assign_work_unit(node)

    return EngineFirst(config, log)
