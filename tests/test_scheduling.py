"""tests/scheduling.py: the units, and the order two simulated workers get them in."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import scheduling
from conftest import PEER_ENGINE_TARGETS, TARGETS


class Worker:
    def __init__(self, name: str) -> None:
        self.name, self.shutting_down, self.got = name, False, []
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.got.append(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def _simulate(seconds: dict[str, float], monkeypatch) -> dict[str, list[tuple[float, str]]]:
    """Two workers that run what the scheduler sends them, test by test, in simulated time (a
    test takes its recorded seconds): per worker, (start, unit) of each test it ran."""
    monkeypatch.setattr(scheduling, "_load", lambda: seconds)
    monkeypatch.setattr(scheduling, "ENGINE_ONLY_FOR", {})  # every peer test an engine's
    collection = list(seconds)
    config = SimpleNamespace(
        getvalue=lambda name: ["2*popen"] if name == "tx" else None,
        option=SimpleNamespace(loadscopereorder=True),
    )
    sched = scheduling.scheduler(config, None)
    workers = [Worker("gw1"), Worker("gw0")]
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, collection)
    sched.schedule()
    queue: dict[Worker, list[int]] = {w: [] for w in workers}
    clock = {w: 0.0 for w in workers}
    runs: dict[str, list[tuple[float, str]]] = {w.name: [] for w in workers}
    while True:
        for w in workers:
            queue[w] += [i for batch in w.got for i in batch]
            w.got.clear()
        busy = [w for w in workers if queue[w]]
        if not busy:
            break
        w = min(busy, key=lambda w: clock[w])
        index = queue[w].pop(0)
        runs[w.name].append((clock[w], scheduling.unit_of(collection[index])))
        clock[w] += seconds[collection[index]]
        sched.mark_test_complete(w, index)
    assert all(w.shutting_down for w in workers)
    assert sum(map(len, runs.values())) == len(collection), runs
    return runs


def test_one_worker_runs_the_engine_units_the_other_the_rest_costliest_first(
    monkeypatch,
) -> None:
    seconds = {
        "tests/test_validation.py::test_a": 1.0,
        **{f"tests/test_validation.py::test_b[{i}]": 1.0 for i in range(20)},
        "tests/test_peer.py::test_p[0.30]": 280.0,
        "tests/test_peer.py::test_p[0.31]": 300.0,
        "tests/test_real_vllm.py::test_each_kind_alone[0.30]": 75.0,
        "tests/test_real_vllm.py::test_each_kind_alone[0.31]": 80.0,
        "tests/test_serve.py::test_several_example_serves_every_instance": 250.0,
        "tests/test_update.py::test_u": 200.0,
    }
    runs = _simulate(seconds, monkeypatch)
    order = {w: list(dict.fromkeys(unit for _, unit in tests)) for w, tests in runs.items()}
    assert order["gw0"] == [
        "engine:tests/test_peer.py::test_p[0.31]",
        "engine:tests/test_peer.py::test_p[0.30]",
        "engine:tests/test_serve.py::test_several_example_serves_every_instance",
    ], order
    assert order["gw1"] == [
        "work:test_update.py",
        "work:tests/test_real_vllm.py::test_each_kind_alone[0.31]",
        "work:tests/test_real_vllm.py::test_each_kind_alone[0.30]",
        "work:test_validation.py",
    ], order


def test_units_follow_the_modules_and_shared_fixtures() -> None:
    unit = scheduling.unit_of
    assert unit("tests/test_validation.py::test_x[a]") == unit("tests/test_validation.py::test_y")
    assert unit("tests/test_peer.py::test_p[0.30]") != unit("tests/test_peer.py::test_p[0.31]")
    # The peer tier starts engines in some targets only (conftest.PEER_ENGINE_TARGETS).
    for target in TARGETS:
        engine = unit(f"tests/test_peer.py::test_p[{target}]").startswith("engine:")
        assert engine == (target in PEER_ENGINE_TARGETS), target
    assert PEER_ENGINE_TARGETS
    assert unit("tests/test_serve.py::test_tensor_parallel_2_runs_the_plugin_in_both_workers") == (
        unit("tests/test_serve.py::test_endpoint_absent_without_vllm_plugins")
    )
    assert unit("tests/test_real_vllm.py::test_each_kind_alone[0.30]").startswith("work:")


def test_the_tables_match_the_collected_tests(request: pytest.FixtureRequest) -> None:
    """What `check` reads at every collection: a test of ENGINE not marked serve or peer, or one
    that uses a SPLIT fixture the table does not list, fails the run before any test."""
    items: list[Any] = [
        SimpleNamespace(
            path=SimpleNamespace(name="test_serve.py"),
            nodeid="tests/test_serve.py::test_new",
            originalname="test_new",
            name="test_new",
            fixturenames=["builtin"],
            iter_markers=lambda name=None: iter([pytest.mark.serve.mark]),
        )
    ]
    with pytest.raises(pytest.UsageError, match="uses builtin is not what SPLIT says"):
        scheduling.check(items)
    items[0].iter_markers = lambda name=None: iter([])
    items[0].fixturenames = []
    with pytest.raises(pytest.UsageError, match="marked serve/peer is False"):
        scheduling.check(items)


def test_a_first_run_on_a_machine_has_the_recorded_costs() -> None:
    """tests/durations.json, what a machine without runs of its own schedules by, reads as
    seconds per test id (a stale record only orders units less well; it fails nothing)."""
    recorded = scheduling._read(scheduling.MEASURED)
    assert recorded and all(v >= 0 and "::" in k for k, v in recorded.items())
