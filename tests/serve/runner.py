"""Run one real `vllm serve` at a time and stop every process it started (tier 3).

A serve costs about 30 s and 3 GB on a 2-core machine, so serves are serialized across every
process on the machine with an exclusive `flock` on LOCK (the generated smoke tests take the
same lock). The server starts in its own session, so its process group holds the API server,
the model-inspection subprocess, `VLLM::EngineCore` and every `VLLM::Worker`; stopping kills
the whole group and checks that nothing of it is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCK = Path("/tmp/vllm-plugin-template-serve.lock")
# The serve recipe of reference/vllm-on-cpu.md (section 4.2).
BASE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}
BASE_ARGS = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
HEALTHY_WITHIN = 300.0  # seconds; a healthy serve takes 22-40 s on 2 cores
# Every serve of the session: (name, seconds from start to healthy), for the summary.
TIMINGS: list[tuple[str, float]] = []


@contextlib.contextmanager
def serve_lock(wait: float = 1800.0) -> Iterator[None]:
    """Hold the machine-wide serve lock (other engineers' serves wait, and we wait for them)."""
    with open(LOCK, "a") as f:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{LOCK} held by another serve for {wait:.0f} s") from None
                time.sleep(1.0)
        try:
            clear_orphan_shm()
            yield
        finally:
            clear_orphan_shm()
            fcntl.flock(f, fcntl.LOCK_UN)


def clear_orphan_shm(shm: Path = Path("/dev/shm")) -> list[str]:
    """Unlink vLLM CPU all-reduce segments that no live process maps; return their names.

    With tensor parallelism on CPU every rank creates `/dev/shm/<ident>-tp:0-[0-1]-cpushm_<rank>`
    (exclusively: an existing name fails the worker with "create shm in SHMManager failed.
    errno: 17"). vLLM unlinks them only on an orderly exit, so a killed serve leaves them. Under
    Ray the ident is the distributed port, so a leftover fails a later run that draws the same
    port. Held under the serve lock, so no serve of ours is between creating and mapping one.
    """
    names = {p.name for p in shm.glob("*-cpushm_*")} if shm.is_dir() else set()
    if not names:
        return []
    for maps in Path("/proc").glob("[0-9]*/maps"):
        with contextlib.suppress(OSError):  # the process ended, or is not ours to read
            mapped = maps.read_text()
            names -= {n for n in names if f"{shm}/{n}" in mapped}
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (shm / name).unlink()
    return sorted(names)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process in process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # Fields after the parenthesized comm: state ppid pgrp ...
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found.append((int(entry.name), cmd.strip()))
    return found


@dataclass
class Response:
    status: int
    body: Any

    def json(self) -> Any:
        return self.body


@dataclass
class Server:
    """A healthy `vllm serve`: HTTP helpers, its log and the plugin trace of its processes."""

    name: str
    url: str
    model: str
    log_path: Path
    trace_path: Path | None
    pid: int
    api_key: str | None = None
    healthy_after: float = 0.0
    members: list[tuple[int, str]] = field(default_factory=list)

    def request(
        self, method: str, path: str, body: Any = None, *, key: bool = True, timeout: float = 60
    ) -> Response:
        headers = {"Content-Type": "application/json"}
        if key and self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = raw.decode(errors="replace")
        return Response(status, parsed)

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Response:
        return self.request("POST", path, body, **kw)

    def ok(self, path: str, body: Any = None) -> Any:
        """POST (or GET when body is None) that must answer 200; returns the JSON body."""
        r = self.get(path) if body is None else self.post(path, body)
        assert r.status == 200, f"{path} -> {r.status}: {r.body}"
        return r.body

    def greedy(self, prompt: str, max_tokens: int = 12, **extra: Any) -> list[int]:
        """Greedy completion token ids of `prompt`."""
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "return_token_ids": True,
            **extra,
        }
        return self.ok("/v1/completions", body)["choices"][0]["token_ids"]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def trace(self, event: str = "register") -> list[dict[str, Any]]:
        """The plugin's trace records of one event ("register", or "patch")."""
        if not self.trace_path or not self.trace_path.exists():
            return []
        lines = self.trace_path.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
        return [r for r in records if r.get("event") == event]


def _stop(proc: subprocess.Popen[bytes], grace: float = 20.0) -> list[tuple[int, str]]:
    """SIGTERM the server's process group, then SIGKILL what is left; returns survivors."""
    pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            if proc.poll() is not None and not group_members(pgid):
                return []
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    return group_members(pgid)


@contextlib.contextmanager
def serve(
    vllm: Path,
    model: Path,
    workdir: Path,
    name: str,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    trace_env: str | None = None,
    api_key: str | None = None,
    healthy_within: float = HEALTHY_WITHIN,
) -> Iterator[Server]:
    """`vllm serve model` on 127.0.0.1 and a free port, under the machine-wide lock.

    `vllm` is the CLI of the environment; `env` adds to BASE_ENV (PYTHONPATH of an overlay,
    VLLM_PLUGINS, ...); `trace_env` names the plugin's trace variable, pointed at a file in
    `workdir`. Yields once /health answers 200; every process of the serve is gone after.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    trace_path = workdir / f"{name}.trace.jsonl" if trace_env else None
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full_env.update(BASE_ENV)
    full_env.update(env or {})
    # A fresh vLLM cache per serve: vLLM caches inspected model info there, and a cache hit
    # skips the model-inspection subprocess (one of the processes the plugin must run in).
    full_env["VLLM_CACHE_ROOT"] = str(workdir / f"{name}.vllm-cache")
    if trace_env and trace_path:
        trace_path.unlink(missing_ok=True)
        full_env[trace_env] = str(trace_path)
    extra = ["--api-key", api_key] if api_key else []
    waiting = time.monotonic()
    with serve_lock():
        waited = time.monotonic() - waiting
        port = free_port()
        cmd = [
            str(vllm), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
            *BASE_ARGS, *extra, *args,
        ]  # fmt: skip
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            started = time.monotonic()
            proc = subprocess.Popen(
                cmd, cwd=workdir, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        server = Server(
            name, f"http://127.0.0.1:{port}", str(model), log_path, trace_path, proc.pid, api_key
        )
        try:
            while True:
                if proc.poll() is not None:
                    raise AssertionError(
                        f"serve {name} exited with {proc.returncode} before it was healthy:\n"
                        + server.log()[-6000:]
                    )
                if time.monotonic() - started > healthy_within:
                    raise AssertionError(
                        f"serve {name} not healthy within {healthy_within:.0f} s:\n"
                        + server.log()[-6000:]
                    )
                with contextlib.suppress(OSError):
                    if server.get("/health", timeout=2).status == 200:
                        break
                time.sleep(0.5)
            server.healthy_after = time.monotonic() - started
            server.members = group_members(proc.pid)
            label = (
                f"{name} (after {waited:.0f} s waiting for the serve lock)" if waited > 1 else name
            )
            TIMINGS.append((label, server.healthy_after))
            yield server
        finally:
            survivors = _stop(proc)
        assert not survivors, f"serve {name} left processes behind: {survivors}"
