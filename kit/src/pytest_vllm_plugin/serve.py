"""The smoke serve's harness: a real `vllm serve` of a plugin, started on 127.0.0.1 one at a
time, with helpers to ask it things and to see what it is made of.

A plugin's tests/test_smoke_serve.py keeps what depends on the plugin (one row per instance
naming its check, from pytest_vllm_plugin.smoke, and the plan's defaults) and takes the rest
from here: Server (requests, metrics, the log, the classes the workers built, the general
plugin's trace), serving() (start, wait for /health, stop the whole process group), the
machine-wide serve lock, the effective plan (the author's tests/serve_plan.py completed by the
defaults), Serves (the serves of a plan, one at a time), the checks every plugin shares
(check_output_matches_transformers, check_general_plugin), and Smoke (the test module's runs,
fixture and skips). The tiny checkpoints come from pytest_vllm_plugin.tiny.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_vllm_plugin import tiny
from pytest_vllm_plugin.checks import load

# One serve at a time on a machine (each needs about 3 GB): every serve takes this lock. The
# name is the one plugins generated before the kit used, so that they and these share it.
LOCK = Path(tempfile.gettempdir()) / "vllm-plugin-template-serve.lock"
HEALTHY_WITHIN = float(os.environ.get("SMOKE_SERVE_TIMEOUT", "420"))  # seconds
PROGRESS_EVERY = 10.0  # seconds between the lines that say what a starting serve is doing
BASE_ARGS = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}
API_KEY = "smoke-test-key"
# Every serve adds this worker extension (on top of the plugin's own, if it has one), so that
# `Server.inspect()` can ask the workers which classes the served model is made of: how the
# checks see a plugin's class in the serving path. Written to the serve's scratch folder.
INSPECTOR = """
import os

import {base_module}


def _name(cls):
    return f"{{cls.__module__}}.{{cls.__qualname__}}"


class SmokeInspector({base}):
    def smoke_inspect(self):
        from vllm.platforms import current_platform

        model = self.model_runner.get_model()
        layers = list(model.modules())
        batch = getattr(self.model_runner, "input_batch", None)
        batch = batch if hasattr(batch, "logitsprocs") else None
        return {{
            "pid": os.getpid(),
            "worker": [_name(c) for c in type(self).__mro__],
            # the served model's class and its bases (vLLM may wrap it: --convert embed)
            "model": [_name(c) for c in type(model).__mro__],
            "modules": sorted({{_name(type(m)) for m in layers}}),
            "attention": sorted(
                {{_name(m.attn_backend) for m in layers if hasattr(m, "attn_backend")}}
                | {{_name(type(m.impl)) for m in layers if hasattr(m, "impl")}}
            ),
            "quant_methods": sorted(
                {{_name(type(m.quant_method)) for m in layers if getattr(m, "quant_method", None)}}
            ),
            "quant_configs": sorted(
                {{_name(type(m.quant_config)) for m in layers if getattr(m, "quant_config", None)}}
            ),
            # the platform this worker runs on, and the logits processors its runner built
            "platform": _name(type(current_platform)),
            "logits_processors": sorted(
                {{_name(type(p)) for p in getattr(batch, "logitsprocs", None).all}} if batch else []
            ),
        }}
"""
_PROBE = """
import torch
if torch.cuda.is_available():
    print("cuda")
else:
    # vLLM's own kernel loader: on x86 the CPU build picks _C, _C_AVX512 or _C_AVX2 by what
    # the processor has (a plain `import vllm._C` dies of SIGILL without AVX-512); a CUDA
    # build has no CPU kernels at all.
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    print("cpu" if hasattr(torch.ops._C, "init_cpu_memory_env") else "none")
"""


def vllm_command() -> str | None:
    """The `vllm` command beside this Python (its environment's), else the one on PATH."""
    beside = Path(sys.executable).with_name("vllm")
    return str(beside) if beside.exists() else shutil.which("vllm")


def device() -> tuple[str | None, str]:
    """("cuda" | "cpu", "") where `vllm serve` can run here, else (None, why not)."""
    if not vllm_command():
        return None, "no `vllm` command beside this Python or on PATH: install vLLM here"
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=600
    )
    found = probe.stdout.strip().splitlines()[-1:] or [""]
    if probe.returncode != 0:
        return None, f"torch or vLLM does not import here: {probe.stderr.strip()[-500:]}"
    if found[0] not in ("cuda", "cpu"):
        return None, (
            "this vLLM build has no CPU kernels (torch.ops._C.init_cpu_memory_env) and no GPU"
            " is visible, so `vllm serve` cannot run on this machine (the CPU build, vllm-cpu,"
            " can)"
        )
    return found[0], ""


def serve_target(distribution: str, blocks: Mapping[str, str]) -> str:
    """Where a serve of `distribution` runs: "cuda" or "cpu"; skips the test (with the reason)
    where no serve can run, or on CPU where a kind in `blocks` stops every CPU serve; fails it
    where the plugin is not installed."""
    found, why = device()
    if not found:
        pytest.skip(why)
    if found == "cpu" and blocks:
        pytest.skip("; ".join(f"{k}: {v}" for k, v in blocks.items()))
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"install the plugin first (pip install -e .): {distribution} not found")
    return found


@contextlib.contextmanager
def serve_lock() -> Iterator[None]:
    """Holds the machine-wide serve lock (LOCK): one serve at a time."""
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A healthy `vllm serve`: HTTP helpers, its log, what its workers are made of and the
    plugin's trace; what the checks and the author's expectations are called with. `spec` is
    the serve's entry of the plan, `tiny` the module pytest_vllm_plugin.tiny (what the tiny
    model says, a LoRA adapter for it)."""

    def __init__(
        self, name: str, workdir: Path, model: str, api_key: str | None, spec: dict[str, Any]
    ) -> None:
        self.name, self.workdir, self.model, self.api_key = name, workdir, model, api_key
        self.spec = spec
        self.tiny: ModuleType = tiny
        self.url = ""
        self.log_path = workdir / "serve.log"
        self.trace_path = workdir / "trace.jsonl"
        self.healthy_after = 0.0
        self.members: list[tuple[int, str]] = []  # (pid, command line) of the serve, once healthy
        self.args: list[str] = []  # the serve's `vllm serve` arguments

    def request(self, method: str, path: str, body: Any = None, key: bool = True) -> Any:
        """(status, parsed body); `key=False` leaves out the API key."""
        headers = {"Content-Type": "application/json"}
        if key and self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text) if text else None
        except json.JSONDecodeError:
            return status, text

    def ok(self, path: str, body: Any = None) -> Any:
        """GET (POST with a body) that must answer 200: its JSON."""
        status, data = self.request("GET" if body is None else "POST", path, body)
        assert status == 200, f"{path} answered {status}: {data}"
        return data

    def complete(
        self, prompt: str | list[int], max_tokens: int = 8, **extra: Any
    ) -> dict[str, Any]:
        """Greedy /v1/completions; the choice, with token_ids."""
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens}
        body.update(temperature=0, return_token_ids=True, **extra)
        return self.ok("/v1/completions", body)["choices"][0]

    def chat(self, content: str, **extra: Any) -> dict[str, Any]:
        """Greedy /v1/chat/completions of one user message; the choice."""
        body = {"model": self.model, "messages": [{"role": "user", "content": content}]}
        body.update(temperature=0, max_tokens=32, **extra)
        return self.ok("/v1/chat/completions", body)["choices"][0]

    def stream_chat(self, content: str, **extra: Any) -> list[dict[str, Any]]:
        """The same, streamed: every chunk's choices[0]["delta"]."""
        body = {"model": self.model, "messages": [{"role": "user", "content": content}]}
        body.update(temperature=0, max_tokens=32, stream=True, **extra)
        status, text = self.request("POST", "/v1/chat/completions", body)
        assert status == 200, text
        chunks = [line[6:] for line in text.splitlines() if line.startswith("data: {")]
        return [c["choices"][0]["delta"] for c in map(json.loads, chunks) if c["choices"]]

    def metric(self, name: str) -> float:
        """Sum of a Prometheus metric's samples on /metrics (0 when absent)."""
        _, text = self.request("GET", "/metrics")
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith((name + "{", name + " "))
        )

    def inspect(self) -> dict[str, Any]:
        """What the first worker's model is made of: class names ("module.Class") of its
        modules, attention backends and implementations, the quant methods and configs of its
        layers, and the worker class's MRO (see INSPECTOR)."""
        results = self.ok("/collective_rpc", {"method": "smoke_inspect"})["results"]
        assert results and all(isinstance(r, dict) for r in results), results
        return results[0]

    def log(self) -> str:
        """The serve's log so far (stdout and stderr of every process of the serve)."""
        return self.log_path.read_text(errors="replace")

    def last_info(self) -> str:
        """The message of the serve's newest INFO line (what vLLM is doing), or "": warnings
        show in the log a failure prints."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 8192))
                lines = log.read().decode(errors="replace").splitlines()
        except OSError:
            return ""
        # "(EngineCore pid=7) INFO 12-04 10:00:01 [loader.py:52] Loading weights took 0.01 s"
        info = re.compile(r"^(?:\(\S+ pid=\d+\) )?INFO \S+ \S+ \[[^\]]*\] (.+)$")
        return next((m[1].strip() for line in reversed(lines) if (m := info.match(line))), "")

    def report(self, **facts: Any) -> None:
        """Appends what the test saw to $SMOKE_SERVE_REPORT (for whoever runs the test from
        outside, such as the template's own tests); nothing when it is unset."""
        path = os.environ.get("SMOKE_SERVE_REPORT")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"serve": self.name, **facts}) + "\n")

    def trace(self, event: str = "register") -> list[dict[str, Any]]:
        """The general plugin's trace records of one event: "register" (each call of its
        register()), "patch" (a patch applied or skipped); [] where nothing was traced."""
        if not self.trace_path.exists():
            return []
        records = map(json.loads, filter(None, self.trace_path.read_text().splitlines()))
        return [r for r in records if r["event"] == event]


def process_group(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes of process group `pgid`."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, _ppid, group = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            if int(group) == pgid and state != "Z":
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(proc.name), cmd.strip()))
    return found


def stop(proc: subprocess.Popen[bytes]) -> list[tuple[int, str]]:
    """SIGTERM the serve's process group (API server, engine core, workers), then SIGKILL;
    the processes still alive after that (none, normally)."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            if proc.poll() is not None and not process_group(proc.pid):
                return []
    return process_group(proc.pid)


def terminal(config: pytest.Config) -> Callable[[str], None]:
    """Writes a line to the terminal while a test runs, past pytest's capture of its output
    (what a starting serve does: it takes 30-60 s); nothing where pytest has no terminal."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(line: str) -> None:
        if reporter is not None:
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                reporter.write_line(line[:100])

    return say


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # As Ctrl-C: pytest stops and tears its fixtures down, which stops the serve.
    raise KeyboardInterrupt(f"terminated by signal {signum}")


@contextlib.contextmanager
def serving(
    name: str,
    workdir: Path,
    model: str,
    args: list[str],
    env: dict[str, str],
    spec: dict[str, Any],
    say: Callable[[str], None],
    trace_env: str | None = None,
) -> Iterator[Server]:
    """`vllm serve model` on 127.0.0.1, under the serve lock; yields once /health answers;
    stops every process of the serve. Says every PROGRESS_EVERY seconds what the serve is
    doing while it waits. `trace_env`: the variable that names the general plugin's trace file
    (Server.trace reads it)."""
    server = Server(name, workdir, model, API_KEY if spec.get("api_key") else None, spec)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full_env.update(BASE_ENV, **env)
    # A fresh vLLM cache: nothing (compiled code, inspected model info) comes from earlier runs.
    full_env["VLLM_CACHE_ROOT"] = str(workdir / "vllm-cache")
    if trace_env:
        full_env[trace_env] = str(server.trace_path)
    with serve_lock():
        port = free_port()
        server.url = f"http://127.0.0.1:{port}"
        cmd = [vllm_command() or "vllm", "serve", model, "--host", "127.0.0.1"]
        cmd += ["--port", str(port), *BASE_ARGS, *args]
        server.args = cmd[2:]
        if server.api_key:
            cmd += ["--api-key", server.api_key]
        with open(server.log_path, "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                cmd,
                cwd=workdir,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        # A terminated test run must still stop the serve (its own process group outlives us).
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        say(f"serve {name!r}: waiting for vllm serve on 127.0.0.1:{port} to answer /health")
        shown = started
        try:
            while True:
                failed = None
                if proc.poll() is not None:
                    failed = f"vllm serve exited with {proc.returncode}"
                elif time.monotonic() - started > HEALTHY_WITHIN:
                    failed = f"vllm serve not healthy within {HEALTHY_WITHIN:.0f} s"
                if failed:
                    pytest.fail(f"{failed}:\n{server.log()[-5000:]}")
                with contextlib.suppress(OSError):
                    if server.request("GET", "/health")[0] == 200:
                        break
                if time.monotonic() - shown >= PROGRESS_EVERY:
                    shown = time.monotonic()
                    doing = server.last_info()
                    waited = f"  {shown - started:.0f} s of {HEALTHY_WITHIN:.0f} s"
                    say(f"{waited}, vLLM: {doing}" if doing else waited)
                time.sleep(0.5)
            server.healthy_after = time.monotonic() - started
            say(f"  healthy after {server.healthy_after:.0f} s")
            server.members = process_group(proc.pid)
            server.report(healthy_after=round(server.healthy_after, 1), args=args)
            yield server
        finally:
            left = stop(proc)
            signal.signal(signal.SIGTERM, previous)
        assert not left, f"processes of the serve left running: {left}"


def expand(value: Any, workdir: Path) -> str:
    """A plan's argument: mappings as JSON; "{workdir}" is the serve's scratch folder."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("{workdir}", str(workdir))


@dataclass
class Plan:
    """What the smoke serve runs: the serves (name: {"checkpoint", "instances", "model",
    "output", "api_key", "vllm_plugins", "args", "env"}), the instances not served with why,
    the flags and environment each instance adds to its serve, and the author's expectations
    (instance key: a function of the Server)."""

    serves: dict[str, dict[str, Any]]
    not_served: dict[str, str] = field(default_factory=dict)
    args: dict[str, list[Any]] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)


def effective_plan(plan: ModuleType | None, defaults: Mapping[str, dict[str, Any]]) -> Plan:
    """The author's plan (a module with SERVES, NOT_SERVED, ARGS, ENV, EXPECT, each optional;
    None where there is none) and, for each instance of `defaults` it does not mention (one a
    later `copier update` added), the template's default: a serve of its own (checked for
    vLLM's contract only; "args", "env" and "model" may be left out: none, generate), or
    {"not_served": why}."""
    serves = {name: dict(spec) for name, spec in getattr(plan, "SERVES", {}).items()}
    not_served = dict(getattr(plan, "NOT_SERVED", {}))
    args, env = dict(getattr(plan, "ARGS", {})), dict(getattr(plan, "ENV", {}))
    named = {key for spec in serves.values() for key in spec["instances"]} | set(not_served)
    for key, default in defaults.items():
        if key in named:
            continue
        if "not_served" in default:
            not_served[key] = default["not_served"]
        else:
            serves[key] = {
                "model": "generate",
                **default,
                "instances": [key],
                "args": [],
                "env": {},
            }
            args[key], env[key] = default.get("args", []), default.get("env", {})
    return Plan(serves, not_served, args, env, dict(getattr(plan, "EXPECT", {})))


def checkpoint(spec: dict[str, Any], workdir: Path, script: Mapping[str, Any] | None = None) -> str:
    """The serve's checkpoint: the tiny Llama built offline ({"tiny": its build() options};
    `script`: the script() options a serve's own "script" adds to or overrides), or a folder
    (or model hub id) as the plan gives it."""
    given = spec["checkpoint"]
    if isinstance(given, dict) and "tiny" in given:
        options = dict(given["tiny"])
        own = options.pop("script", None) or {}
        return str(tiny.build(workdir / "model", **options, **{**(script or {}), **own}))
    found = Path(str(given)).expanduser()
    return str(found.resolve()) if found.exists() else str(given)


class Serves:
    """Starts the serves of a plan on demand, one at a time: asking for another stops the
    current one first (each holds the machine-wide lock and 3 GB). `not_on_cpu`: the
    instances left out of a CPU serve; `entry_points`: VLLM_PLUGINS of a serve that sets it;
    `trace_env` and `script`: see serving() and checkpoint()."""

    def __init__(
        self,
        target: str,
        tmp_path_factory: pytest.TempPathFactory,
        config: pytest.Config,
        plan: Plan,
        *,
        not_on_cpu: Mapping[str, str] | None = None,
        entry_points: list[str] | None = None,
        trace_env: str | None = None,
        script: Mapping[str, Any] | None = None,
    ) -> None:
        self.target, self.tmp, self.plan = target, tmp_path_factory, plan
        self.not_on_cpu, self.entry_points = not_on_cpu or {}, entry_points or []
        self.trace_env, self.script = trace_env, script
        self.say = terminal(config)
        self.name: str | None = None
        self.server: Server | None = None
        self.failure: str | None = None
        self.stack = contextlib.ExitStack()

    def get(self, name: str) -> Server:
        """The running serve `name`, started (and any other stopped) if need be."""
        if name != self.name:
            self.close()
            self.name = name
            try:
                self.server = self.stack.enter_context(self._start(name))
            except BaseException as e:  # pytest.fail() raises a BaseException
                self.failure = f"serve {name!r} did not start: {e}"
                raise
        if self.failure or self.server is None:
            pytest.fail(self.failure or f"serve {name!r} is not running")
        return self.server

    def close(self) -> None:
        """Stops the running serve, if any."""
        self.name, self.server, self.failure = None, None, None
        self.stack.close()

    def _start(self, name: str) -> contextlib.AbstractContextManager[Server]:
        spec = self.plan.serves[name]
        workdir = self.tmp.mktemp(re.sub(r"[^\w.-]", "_", name))  # "endpoint:/v1/x" is a name
        model = checkpoint(spec, workdir, self.script)
        # The serve's own flags, then each instance's, but for one that cannot serve on CPU.
        args = [expand(a, workdir) for a in spec.get("args", [])]
        env = {k: expand(v, workdir) for k, v in spec.get("env", {}).items()}
        for key in spec["instances"]:
            if not (self.target == "cpu" and key in self.not_on_cpu):
                args += [expand(a, workdir) for a in self.plan.args.get(key, [])]
                env.update({k: expand(v, workdir) for k, v in self.plan.env.get(key, {}).items()})
        if spec.get("vllm_plugins"):
            env["VLLM_PLUGINS"] = ",".join(self.entry_points)
        # The inspector extends the plugin's worker extension, if the serve has one.
        base = "object"
        if "--worker-extension-cls" in args:
            at = args.index("--worker-extension-cls")
            base = args.pop(at + 1)
            args.pop(at)
        source = INSPECTOR.format(base_module=base.rpartition(".")[0] or "builtins", base=base)
        (workdir / "_smoke_inspect.py").write_text(source)
        path = [str(workdir), *filter(None, [os.environ.get("PYTHONPATH")])]
        env["PYTHONPATH"] = os.pathsep.join(path)
        env["VLLM_SERVER_DEV_MODE"] = "1"  # POST /collective_rpc, GET /server_info
        args += ["--worker-extension-cls", "_smoke_inspect.SmokeInspector"]
        return serving(name, workdir, model, args, env, spec, self.say, self.trace_env)


def check_output_matches_transformers(server: Server) -> None:
    """The served model (with every kind of the serve in its path) computes what transformers
    computes from the same checkpoint, and decodes greedily: a serve's "output" in the plan,
    for kinds that pass vLLM's computation through."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    choice = server.complete("Hello world, this is", max_tokens=8, logprobs=0)
    prompt_ids, ids = choice["prompt_token_ids"], choice["token_ids"]
    server.report(prompt="Hello world, this is", greedy=ids)
    served = choice["logprobs"]["token_logprobs"]
    assert len(ids) == 8 and len(served) == 8
    # The tiny checkpoint is a Llama (pytest_vllm_plugin.tiny) whatever its config.json names.
    tiny_llama = isinstance(server.spec["checkpoint"], dict) and "tiny" in server.spec["checkpoint"]
    loader = LlamaForCausalLM if tiny_llama else AutoModelForCausalLM
    model = loader.from_pretrained(server.model, torch_dtype=torch.float32)  # as served
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ids])).logits[0, len(prompt_ids) - 1 : -1]
    expected = torch.log_softmax(logits, dim=-1)
    for step, (token, logprob) in enumerate(zip(ids, served, strict=True)):
        assert abs(expected[step, token].item() - logprob) < 1e-3, (step, token, logprob)
        # Greedy: the served token is the most likely one (up to float noise).
        assert expected[step, token] >= expected[step].max() - 1e-3, (step, token)


def role(record: dict[str, Any]) -> str:
    """Which process of the serve wrote a trace record."""
    if record["mp"] == "EngineCore":
        return "engine core"
    if record["mp"].startswith("VllmWorker"):
        return "worker"
    if "vllm.model_executor.models.registry" in record["title"]:
        return "model inspection"
    if " serve " in record["title"]:
        return "front end"
    return "other: " + record["title"]


def check_general_plugin(server: Server) -> None:
    """register() ran in the front end, the model-inspection subprocess, the engine core and
    the worker, once in each, and in every vLLM process of the serve (each general-plugin
    entry point of the package, where the trace names them)."""
    records = server.trace()
    vllm_processes = {pid for pid, cmd in server.members if "resource_tracker" not in cmd}
    for entry_point in {r.get("entry_point") for r in records}:
        ran = [r for r in records if r.get("entry_point") == entry_point]
        roles = sorted(role(r) for r in ran)
        assert roles == ["engine core", "front end", "model inspection", "worker"], ran
        pids = [r["pid"] for r in ran]
        assert len(set(pids)) == len(pids), f"{entry_point or 'register()'} ran twice: {ran}"
        assert vllm_processes <= set(pids), (server.members, ran)
    assert "Traceback" not in server.log(), server.log()[-5000:]


def vllm_entry_points(distribution: str) -> list[str]:
    """The names of the installed `distribution`'s vllm.* entry points (what VLLM_PLUGINS lists
    for a serve that loads every plugin of the package)."""
    eps = importlib.metadata.distribution(distribution).entry_points
    return sorted({e.name for e in eps if e.group.startswith("vllm.")})


class Smoke:
    """A plugin's smoke test (its tests/test_smoke_serve.py), all but the per-instance rows: the
    effective plan (the author's tests/serve_plan.py at `plan_path`, completed by `defaults`,
    the template's plan of each instance), the serves, which check runs in which serve, and
    each check's skips. `checks`: instance key to the check of vLLM's contract for it (a
    function of the keyword `server`, such as partial(pytest_vllm_plugin.smoke.tool_parser,
    ...)); `loader_checks`: the plugin's tests/vllm_checks.py, whose CHECKS rows give the rest
    (pytest_vllm_plugin.smoke.rows(), read when a serve runs: collecting imports no plugin);
    `not_on_cpu` and `block_cpu`: the instances that cannot serve on CPU, and those whose mere
    installation stops every CPU serve, with why; `trace_env`: the variable that names the
    general plugin's trace file (None: no general plugin, no "general_plugin" check);
    `entry_points` and `script`: see Serves (entry_points left out: every vllm.* entry point of
    the installed `distribution`). `instances`: a JSON table (a generated plugin's
    tests/instances.json) that gives `defaults`, `not_on_cpu`, `block_cpu` and `script` at
    once: {"instances": {key: {"serve": default, "not_on_cpu": why, "block_cpu": why}},
    "script": {...}}, each key of a line optional."""

    def __init__(
        self,
        plan_path: Path,
        *,
        distribution: str,
        instances: Path | None = None,
        defaults: Mapping[str, dict[str, Any]] | None = None,
        checks: Mapping[str, Callable[..., None]] | None = None,
        loader_checks: Path | None = None,
        entry_points: list[str] | None = None,
        trace_env: str | None = None,
        not_on_cpu: Mapping[str, str] | None = None,
        block_cpu: Mapping[str, str] | None = None,
        script: Mapping[str, Any] | None = None,
    ) -> None:
        defaults, not_on_cpu, block_cpu = (
            dict(defaults or {}),
            dict(not_on_cpu or {}),
            dict(block_cpu or {}),
        )
        if instances is not None:
            table = json.loads(Path(instances).read_text())
            for key, line in table["instances"].items():
                if "serve" in line:
                    defaults.setdefault(key, line["serve"])
                if "not_on_cpu" in line:
                    not_on_cpu.setdefault(key, line["not_on_cpu"])
                if "block_cpu" in line:
                    block_cpu.setdefault(key, line["block_cpu"])
            script = table.get("script") if script is None else script
        self.distribution, self.entry_points, self.trace_env = distribution, entry_points, trace_env
        self.not_on_cpu, self.block_cpu = not_on_cpu, block_cpu
        self.script, self.instances = script, list(defaults)
        self.checks: dict[str, Callable[[Server], None]] = {
            "output": check_output_matches_transformers,
            **({"general_plugin": check_general_plugin} if trace_env else {}),
            **(checks or {}),
        }
        self.loader_checks = loader_checks
        # A plan written before the kit may `import tiny_model` (the template's former helper):
        # the kit's module is the same model, the same tokens.
        sys.modules.setdefault("tiny_model", tiny)
        self.plan = effective_plan(load(plan_path) if plan_path.exists() else None, defaults)

    def runs(self) -> list[tuple[str, str]]:
        """(serve, check), grouped by serve so that each serve starts once: the serve's own
        checks ("output" where the plan asks, "general_plugin"), then each instance it switches
        on that has a contract check or an expectation of the author's (or is unknown)."""
        found = []
        checked = self.checks.keys() | self.plan.expect.keys()
        if self.loader_checks:  # the instances of a kind the kit checks (smoke.rows())
            from pytest_vllm_plugin.smoke import KINDS

            checked |= {k for k in self.instances if k.partition(":")[0] in KINDS}
        for name, spec in self.plan.serves.items():
            own = ["output"] if spec.get("output") else []
            own += ["general_plugin"] if self.trace_env else []
            more = [k for k in spec["instances"] if k in checked or k not in self.instances]
            found += [(name, check) for check in own + more]
        return found

    def serves(
        self, tmp_path_factory: pytest.TempPathFactory, config: pytest.Config
    ) -> Iterator[Serves]:
        """The Serves of the plan (a module-scoped fixture's body); skips every test where no
        serve can run here (serve_target())."""
        target = serve_target(self.distribution, self.block_cpu)
        manager = Serves(
            target,
            tmp_path_factory,
            config,
            self.plan,
            not_on_cpu=self.not_on_cpu,
            entry_points=vllm_entry_points(self.distribution)
            if self.entry_points is None
            else self.entry_points,
            trace_env=self.trace_env,
            script=self.script,
        )
        try:
            yield manager
        finally:
            manager.close()

    def run(self, name: str, check: str, serves: Serves) -> None:
        """In the serve `name`: vLLM's contract for `check`, then the author's expectations of
        it (EXPECT); skipped, saying why, where it cannot run here."""
        if self.loader_checks and check not in self.checks:
            from pytest_vllm_plugin import smoke

            rows = smoke.rows(load(self.loader_checks).CHECKS)
            self.checks |= {k: v for k, v in rows.items() if k not in self.checks}
            self.loader_checks = None  # read once
        if check not in self.instances and check not in self.checks:
            why = "is not an instance of this plugin: drop it from tests/serve_plan.py"
            pytest.skip(f"{check} {why}")
        if serves.target == "cpu" and check in self.not_on_cpu:
            pytest.skip(f"{check} cannot serve on CPU: {self.not_on_cpu[check]}")
        instances = self.plan.serves[name]["instances"]
        if serves.target == "cpu" and instances and all(k in self.not_on_cpu for k in instances):
            pytest.skip(f"serve {name!r} exists for kinds that cannot serve on CPU: {instances}")
        server = serves.get(name)
        if check in self.checks:
            self.checks[check](server=server)
        if check in self.plan.expect:
            self.plan.expect[check](server)

    def not_served(self, instance: str) -> None:
        """Skips, saying why the instance is not served here (the plan's NOT_SERVED)."""
        pytest.skip(f"{instance}: {self.plan.not_served[instance]}")
