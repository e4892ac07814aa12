"""Tier 3: a generated plugin under vLLM's Ray executor on this CPU machine (issue 17).

Ray comes from the package index into an overlay of its own (tests/realvllm/rayenv.py), runs
on the loopback address with its session in a folder of the test, and every Ray process the
test started is gone when it ends.

1. `vllm serve --distributed-executor-backend ray --tensor-parallel-size 2` with vllm-cpu: vLLM
   starts a local Ray, then its Ray executor refuses the CPU platform with
   `ValueError: current platform cpu does not support ray.` (vllm/v1/executor/ray_utils.py,
   `initialize_ray_cluster`: `CpuPlatform.ray_device_key` is empty, the Ray resource each
   worker would be placed on). The general plugin had run in the front end, the
   model-inspection subprocess and the engine core; no worker was started. When a vllm-cpu
   release serves with Ray, this test fails and says so: then it becomes the TP2 check.
2. What can be proven without that executor: vLLM's own Ray worker class (`RayWorkerProc`, of
   the default Ray executor, RayExecutorV2), two actors on a local Ray set up as the executor
   sets them up (tests/serve/ray_workers.py: the driver's variables handed over by vLLM,
   `initialize_worker`: `init_worker`, `init_device` for the TP group, `load_model`), ran the
   general plugin once in each Ray worker process (the plugin's trace, by pid and Ray's process
   title) and answer through the worker extension from both ranks. A second plugin, installed
   nowhere, shipped as a wheel in a Ray job's runtime_env `py_modules` is found by vLLM's
   entry-point lookup in that job's Ray worker and registers there; shipped as its source
   folder it imports, but vLLM never loads it (no installed metadata, no entry point).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CATALOG, SERVING_TARGET
from realvllm import envs, rayenv
from serve import runner, tiny

pytestmark = [
    pytest.mark.serve,
    pytest.mark.skipif(
        "worker_extension" not in CATALOG, reason="the worker_extension kind is not in the catalog"
    ),
]
TARGET = SERVING_TARGET
REFUSAL = "ValueError: current platform cpu does not support ray."
WORKERS = 2  # tensor parallel 2 on the 2-core machine, one core per rank


@pytest.fixture(scope="module")
def env() -> envs.VllmEnv:
    found = envs.ensure(TARGET)
    assert found.can_serve
    return found


@pytest.fixture(scope="module")
def ray_folder(env: envs.VllmEnv) -> Path:
    return rayenv.overlay(env)


@pytest.fixture(scope="module")
def plugin(rendered) -> Path:
    """A plugin with the general plugin and a worker extension (as the mp TP2 serve's)."""
    kinds = ["general", "worker_extension"]
    return rendered(kinds=kinds, vllm_target=TARGET, project_name="Ray TP")


@pytest.fixture(scope="module")
def model(env: envs.VllmEnv, plugin: Path, tmp_path_factory) -> Path:
    return tiny.build(env, plugin, tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture()
def session() -> Iterator[Path]:
    """A short folder for Ray's session (its socket paths must stay under 108 bytes); every
    Ray process with this session is stopped afterwards, and none may have been left."""
    folder = Path(tempfile.mkdtemp(prefix="vpt-ray-", dir="/tmp"))
    try:
        yield folder
    finally:
        left = rayenv.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
    assert not left, f"Ray processes left behind: {left}"


def _answers(project: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def _names(project: Path) -> dict[str, str]:
    """The plugin's trace variable, variable prefix, worker extension and its method."""
    answers = _answers(project)
    package, prefix = answers["package_name"], answers["env_prefix"]
    prefix_class = "".join(part.title() for part in package.split("_"))
    return {
        "package": package,
        "prefix": prefix,
        "trace": answers.get("trace_env", f"{prefix}TRACE"),  # recorded (copier.yml trace_env)
        "extension": f"{package}.worker_extension.{prefix_class}WorkerExtension",
        "method": answers.get("worker_extension_method", ""),
        "entry_point": answers.get("general_entry_point", package),
    }


def _records(trace: Path) -> list[dict[str, Any]]:
    if not trace.exists():
        return []
    rows = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("event") == "register"]


def test_ray_executor_tp2_serve_is_refused_on_cpu(
    env: envs.VllmEnv, ray_folder: Path, plugin: Path, model: Path, session: Path, tmp_path: Path
) -> None:
    names = _names(plugin)
    site = envs.install_overlay(env, plugin, tmp_path / "site")
    extra = rayenv.env(ray_folder, session, site["PYTHONPATH"])
    extra.update(VLLM_CPU_OMP_THREADS_BIND="0|1", VLLM_SERVER_DEV_MODE="1")
    args = ["--distributed-executor-backend", "ray", "--tensor-parallel-size", str(WORKERS)]
    args += ["--worker-extension-cls", names["extension"]]
    work = tmp_path / "serve"
    started = time.monotonic()
    refused = pytest.raises(AssertionError, match=r"exited with \d+ before it was healthy")
    with refused as failed, runner.serve(
        env.bin / "vllm", model, work, "ray tp2", args=args, env=extra,
        trace_env=names["trace"], healthy_within=240,
    ):  # fmt: skip
        pytest.fail("vllm-cpu served with the Ray executor: make this test the Ray TP2 check")
    took = time.monotonic() - started
    log = (work / "ray tp2.log").read_text(errors="replace")
    print(f"ray tp2 serve refused after {took:.1f} s")
    assert REFUSAL in log, str(failed.value)[-6000:]
    # Ray itself started, then the executor looked at the platform's Ray resource.
    assert "Started a local Ray instance." in log, log[-4000:]
    assert re.search(r"in initialize_ray_cluster\n.*\n.*" + re.escape(REFUSAL), log), log[-4000:]
    records = _records(work / "ray tp2.trace.jsonl")
    kinds_of = sorted(
        "engine core" if r["mp"] == "EngineCore" else
        "model inspection" if "vllm.model_executor.models.registry" in r["title"] else
        "front end" if " serve " in r["title"] else f"unexpected: {r}"
        for r in records
    )  # fmt: skip
    assert kinds_of == ["engine core", "front end", "model inspection"], records


def _wheel(env: envs.VllmEnv, project: Path, dest: Path) -> Path:
    """The project's wheel, built by the vLLM environment's pip (hatchling is there)."""
    subprocess.run(
        [str(env.python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(dest), str(project)],
        check=True, env=envs.isolated_pip_env(), timeout=300,
    )  # fmt: skip
    (wheel,) = dest.glob("*.whl")
    return wheel


def test_vllm_ray_workers_run_the_plugin(
    env: envs.VllmEnv,
    ray_folder: Path,
    plugin: Path,
    model: Path,
    rendered,
    session: Path,
    tmp_path: Path,
) -> None:
    names = _names(plugin)
    site = envs.install_overlay(env, plugin, tmp_path / "site")
    shipped = rendered(kinds=["general"], vllm_target=TARGET, project_name="Ray Shipped")
    shipped_names = _names(shipped)
    wheel = _wheel(env, shipped, tmp_path / "wheel")
    trace, shipped_trace = tmp_path / "trace.jsonl", tmp_path / "shipped.jsonl"
    run_env = rayenv.clean(
        {k: v for k, v in envs.isolated_pip_env().items() if not k.startswith("VLLM_")}
    )
    run_env.update(runner.BASE_ENV, **rayenv.env(ray_folder, session, site["PYTHONPATH"]))
    run_env.update(
        PATH=f"{env.bin}{os.pathsep}{run_env.get('PATH', '')}",  # Ray's `pip` for py_modules
        VLLM_CPU_OMP_THREADS_BIND="0|1",
        VLLM_CACHE_ROOT=str(tmp_path / "vllm-cache"),
    )
    plugins = ",".join([names["entry_point"], shipped_names["entry_point"]])
    cmd = [
        str(env.python), str(Path(runner.__file__).with_name("ray_workers.py")),
        "--model", str(model), "--extension", names["extension"], "--method", names["method"],
        "--copy", f"{names['trace']}={trace}",
        "--copy", f"VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY={names['prefix']}",
        "--copy", f"VLLM_PLUGINS={plugins}",
        "--shipped", str(wheel),
        "--shipped-src", str(shipped / "src" / shipped_names["package"]),
        "--shipped-name", shipped_names["entry_point"],
        "--shipped-env", f"{shipped_names['trace']}={shipped_trace}",
    ]  # fmt: skip
    started = time.monotonic()
    with runner.serve_lock():  # about 3 GB, like a serve
        proc = subprocess.run(
            cmd, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=600
        )
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    print(f"Ray workers: {took:.1f} s, {result['timings']}")
    assert result["node_ip"] == "127.0.0.1", result["node_ip"]
    # vLLM passed the driver's variables on (set after Ray started: no other way in).
    assert {names["trace"], "VLLM_PLUGINS"} <= set(result["copied"]), result["copied"]
    workers = {w["pid"]: w for w in result["workers"]}
    assert len(workers) == WORKERS and result["driver_pid"] not in workers, result["workers"]
    assert all(w["plugins"] == plugins for w in workers.values()), workers
    # The general plugin ran once in each Ray worker process, from vLLM's init_worker.
    records = _records(trace)
    in_workers = [r for r in records if r["pid"] in workers]
    assert sorted(r["pid"] for r in in_workers) == sorted(workers), records
    assert all(r["title"].startswith("ray::RayWorkerProc") for r in in_workers), in_workers
    # The worker extension is mixed into the Ray workers' worker class, one per rank.
    pings = result["pings"]
    assert sorted(p["rank"] for p in pings) == list(range(WORKERS)), pings
    assert {p["pid"] for p in pings} == set(workers), (pings, workers)
    # Shipped in runtime_env py_modules: a wheel is pip-installed with its metadata, so vLLM's
    # entry-point lookup loads it; a source folder imports, but vLLM never loads it.
    as_wheel, as_source = result["shipped"]["wheel"], result["shipped"]["source folder"]
    assert as_wheel["loaded"] and as_wheel["importable"], as_wheel
    assert as_source["importable"] and not as_source["loaded"], as_source
    shipped_records = _records(shipped_trace)
    assert [r["pid"] for r in shipped_records] == [as_wheel["pid"]], shipped_records
