"""Tier 2: generated packages inside real vLLM, through vLLM's own loaders, in fresh processes.

Environments are provisioned by tests/realvllm/envs.py (cached under ~/.cache, keyed by
version). Generated packages are installed into a throwaway `--target` folder put on
PYTHONPATH, so the cached environment is never modified and importlib.metadata still finds
their entry points.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml
from conftest import (
    ALL_KINDS_TARGETS,
    CATALOG,
    CPU_PLATFORM,
    EACH_KIND_TARGETS,
    EXAMPLE_TARGETS,
    RANGE,
    SAMPLE_TARGETS,
    SEVERAL,
    VLLM,
    instances,
    kinds_for,
    range_of,
    render_file,
    solo,
)
from realvllm import envs

pytestmark = pytest.mark.real_vllm
DRIVER = Path(__file__).parent / "realvllm" / "driver.py"
ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}


def _run(cmd: list[str], cwd: Path, extra: dict[str, str], timeout: int = 1200) -> str:
    env = dict(os.environ, **ENV, **extra)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-6000:]}"
    return out


@pytest.mark.parametrize("target", ALL_KINDS_TARGETS)
def test_all_kinds_package_passes_its_suite(target: str, rendered, tmp_path: Path) -> None:
    """A package with every kind of the target: its own suite and lint, as its author runs them,
    and vLLM's own loaders find every instance in a fresh process. In the newest target every
    entry-point name is an answer (issue 20: general plugin, platform, and the elements of the
    entry-point kinds), which the suite and vLLM's loaders find under that name."""
    from test_render import CUSTOM_ENTRY_POINTS

    names = {k: v for k, v in CUSTOM_ENTRY_POINTS.items() if k != "kinds"}
    project = rendered(
        kinds=kinds_for(target), vllm_target=target, **(names if target == VLLM["latest"] else {})
    )
    # The serve smoke test is tier 3's (tests/test_serve.py runs it in each CPU build).
    ok = _suite_loaders_and_lint(envs.ensure(target), project, tmp_path / "site")
    assert ok == set(instances(project)) | {"lazy"}, ok


@pytest.mark.parametrize("target", EACH_KIND_TARGETS)
def test_each_kind_alone(target: str, rendered, tmp_path: Path) -> None:
    """One package per kind, all installed side by side (plugins must coexist): each suite, and
    vLLM's loaders plus the idempotency checks of every package in one fresh process each."""
    env = envs.ensure(target)
    projects = [rendered(**solo(kind, target)) for kind in kinds_for(target)]
    paths = envs.install_overlay(env, projects, tmp_path / "site")
    # The in-process tests of every package in one session; the fresh-process ones via DRIVER.
    _run(
        [
            str(env.python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "-m",
            "not serve",
            "-k",
            "not fresh_vllm_process",
            *[str(p / "tests") for p in projects],
        ],
        tmp_path,
        paths,
    )
    # The two fresh processes side by side (each mostly imports vLLM, on one core).
    with ThreadPoolExecutor(2) as pool:
        outs = pool.map(
            lambda group: _run(
                [str(env.python), str(DRIVER), group, *map(str, projects)], tmp_path, paths
            ),
            ("loaders", "idempotency"),
        )
        for out in outs:
            result = json.loads(out_line(out))
            failed = result["failed"]
            assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())
    for project in projects:
        _run([str(env.bin / "ruff"), "check", "."], project, paths)
        _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)


# What examples/several.yml promises (issue 13): at least this many instances of these kinds.
SEVERAL_AT_LEAST = {
    "model": 3,
    "tool_parser": 2,
    "reasoning_parser": 2,
    "kv_connector": 2,
    "custom_op": 2,
    "stat_logger": 2,
    "io_processor": 2,
    "logits_processor": 2,
    "endpoint": 2,
}


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_several_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """examples/several.yml through `copier copy --data-file`: every instance checked by vLLM's
    own loaders in fresh processes (one row each), the switches and settings, each instance's
    own test, and lint."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "several", SEVERAL, vllm_target=target)
    counts: dict[str, int] = {}
    for key in instances(project):
        counts[key.partition(":")[0]] = counts.get(key.partition(":")[0], 0) + 1
    assert all(counts.get(k, 0) >= n for k, n in SEVERAL_AT_LEAST.items()), counts
    # Issue 36: each general-plugin entry point, VLLM_PLUGINS naming it alone, runs its own steps
    # (every other step absent from vLLM's registries), the retired name none.
    answers = yaml.safe_load(SEVERAL.read_text())
    names = [answers.get("general_entry_point", answers["package_name"])]
    names += list(answers["general_entry_points"])
    alone = {f"test_switches_in_fresh_vllm_process[VLLM_PLUGINS={name}]" for name in names}
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site", alone)
    expected = {key for key in instances(project)} | {"lazy"}
    assert ok == expected, ok ^ expected


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_cpu_platform_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """Issue 36 item 7: examples/cpu-platform.yml, the answers that look like clashes but that
    vLLM accepts (device name cpu, a torch pin in a platform plugin, CUSTOM, vLLM's own KV
    connector name by module path, the scheduler's and worker extension's class names, a
    fork's vllm.* group): its suite, vLLM's loaders for every instance, and lint."""
    project = render_file(tmp_path / "cpu-platform", CPU_PLATFORM, vllm_target=target)
    assert set(instances(project)) == {
        "general",
        "platform",
        "attention_backend:CUSTOM",
        "kv_connector:LMCacheMPConnector",
        "scheduler",
        "worker_extension",
    }, instances(project)
    pyproject = (project / "pyproject.toml").read_text()
    assert '"torch==2.14.0"' in pyproject
    assert '[project.entry-points."vllm.fork_plugins"]' in pyproject
    # The kit loads every vllm.* entry point (the fork's too) and compares them with pyproject.
    must_pass = {"test_entry_points_resolve"}
    ok = _suite_loaders_and_lint(envs.ensure(target), project, tmp_path / "site", must_pass)
    expected = set(instances(project)) | {"lazy"}
    assert ok == expected, ok ^ expected


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_an_authors_own_step_is_run_and_checked(target: str, rendered, tmp_path: Path) -> None:
    """Issue 34: a class the author adds the way vLLM plugins do, one line in the author's
    steps.py (no template-owned file edited), is registered by the glue and covered by the
    kit's checks: vLLM's loaders in a fresh process, idempotency, laziness and the switches."""
    import shutil

    project = tmp_path / "acme"
    shutil.copytree(rendered(kinds=["general", "tool_parser"], project_name="acme",
                             vllm_target=target), project)  # fmt: skip
    src = project / "src" / "acme"
    (src / "tool_parser_json.py").write_text(
        '"""The author\'s second parser: the first, with other tags."""\n\n'
        "from acme.tool_parser import AcmeToolParser\n\n\n"
        "class AcmeJsonToolParser(AcmeToolParser):\n"
        '    start_tag = "<json>"\n    end_tag = "</json>"\n'
    )
    steps = src / "steps.py"
    row = '    "tool_parser:acme_json": "acme.tool_parser_json:AcmeJsonToolParser",\n'
    steps.write_text(steps.read_text().replace("] = {}\n", "] = {\n" + row + "}\n"))
    assert "acme_json" in steps.read_text()
    ok = _suite_loaders_and_lint(envs.ensure(target), project, tmp_path / "site")
    assert ok == {"general", "tool_parser:acme", "tool_parser:acme_json", "lazy"}, ok


@pytest.fixture(scope="module")
def range_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/range.yml rendered once: the one package every release of its range runs."""
    return render_file(tmp_path_factory.mktemp("range") / "range", RANGE)


@pytest.mark.parametrize("target", range_of(RANGE))
def test_range_example_passes_in_each_release(
    target: str, range_package: Path, tmp_path: Path
) -> None:
    """Issue 16: examples/range.yml (vLLM 0.31 to 0.33, one package): its suite, vLLM's own
    loaders for every instance in a fresh process, and lint, in each release of the range."""
    assert len(range_of(RANGE)) >= 3, range_of(RANGE)
    kinds = {key.partition(":")[0] for key in instances(range_package)}
    assert {
        "model",
        "tool_parser",
        "kv_connector",
        "attention_backend",
        "sleep_mode_backend",
    } <= kinds
    ok = _suite_loaders_and_lint(envs.ensure(target), range_package, tmp_path / "site")
    expected = set(instances(range_package)) | {"lazy"}
    assert ok == expected, ok ^ expected


def _suite_loaders_and_lint(
    env: envs.VllmEnv, project: Path, site: Path, must_pass: set[str] | None = None
) -> set[str]:
    """The project installed into `env`: its suite passes (but the serve), each test named in
    `must_pass` among them, its loader checks in a fresh process fail nowhere, and ruff is
    clean; the loader checks that passed."""
    paths = envs.install_overlay(env, project, site)
    # The suite's own loaders test is the fresh process below (run directly, for the names of
    # the checks that passed): deselected there, so that process is not paid for twice.
    cmd = [str(env.python), "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-m",
           "not serve", "-k", "not test_in_fresh_vllm_process[loaders]"]  # fmt: skip
    out = _run(cmd, project, paths)
    # pytest's summary line (a passed test's captured log may say "failed": a platform's probe).
    summary = [line for line in out.splitlines() if re.search(r" passed.* in [\d.]+s", line)]
    assert summary and " failed" not in summary[-1], out[-3000:]
    passed = set(re.findall(r"^PASSED \S+::(\S+)", out, re.M))
    assert (must_pass or set()) <= passed, sorted((must_pass or set()) - passed)
    loaders = _run([str(env.python), str(project / "tests" / "vllm_checks.py"), "loaders"],
                   project, paths)  # fmt: skip
    result = json.loads(out_line(loaders))
    assert not result["failed"], result["failed"]
    _run([str(env.bin / "ruff"), "check", "."], project, paths)
    _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)
    return set(result["ok"])


# The tests each replaced class's generated test file holds when the catalog has its sample.
SAMPLE_TESTS = {
    "custom_op": ["test_subclasses_vllms_op", "test_forward_native_matches_vllm"],
    "pluggable_layer": ["test_subclasses_vllms_layer", "test_forward_matches_vllm"],
}


@pytest.mark.parametrize("kind", list(SAMPLE_TESTS))
@pytest.mark.parametrize("target", SAMPLE_TARGETS)
def test_every_sample_asserts_in_real_vllm(
    kind: str, target: str, rendered, tmp_path: Path
) -> None:
    """Issue 19: one plugin replacing every op (layer) the catalog has a CPU sample for. Each
    generated test builds vLLM's class and the plugin's and compares their outputs: every one
    runs and passes; only custom ops' forward_cpu skips, off vLLM's CPU build (or a build
    without the kernels it calls), and none is generated where vLLM's own is no reference."""
    env = envs.ensure(target)
    builtins = CATALOG[kind]["builtins"][target]
    samples = CATALOG[kind]["samples"]
    selectable = set(builtins["names"]) - set(builtins.get("duplicates") or {})
    names = sorted(n for n in samples if n in selectable)
    project = rendered(
        kinds=[kind], vllm_target=target, project_name=f"All {kind}", **{f"{kind}_names": names}
    )
    paths = envs.install_overlay(env, project, tmp_path / "site")
    files = sorted((project / "tests").glob(f"test_{kind}_*.py"))
    assert len(files) == len(names), (len(files), len(names))
    report = tmp_path / "report.xml"
    cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    _run([*cmd, *map(str, files)], project, paths)
    got: dict[tuple[str, str], str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").rpartition(".")[2].removeprefix("test_")
        got[module, case.get("name", "")] = (
            "skipped" if case.find("skipped") is not None else "passed"
        )
    cpu = "passed" if VLLM["targets"][target]["cpu_build"] else "skipped"
    expected = {}
    for key, module in instances(project).items():
        sample = samples[key.partition(":")[2]]
        expected |= {(module, test): "passed" for test in SAMPLE_TESTS[kind]}
        forward_cpu = (module, "test_forward_cpu_matches_vllm_native")
        if kind == "custom_op" and not sample.get("no_cpu"):
            # Where forward_cpu calls kernels of some CPU builds only, this build decides.
            kernels = sample.get("cpu_kernels") and forward_cpu in got
            expected[forward_cpu] = got[forward_cpu] if kernels else cpu
    assert len({m for m, _ in got}) == len(names), sorted({m for m, _ in got})
    assert got == expected, {
        k: (got.get(k), expected.get(k))
        for k in got.keys() | expected.keys()
        if got.get(k) != expected.get(k)
    }
    _run([str(env.bin / "ruff"), "check", "."], project, paths)
    _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)


def out_line(out: str) -> str:
    return out.split("VLLM_CHECKS ", 1)[1].splitlines()[0]


def answered(project: Path, question: str) -> list[Any]:
    """A list answer as the generated project's .copier-answers.yml records it."""
    import yaml

    return yaml.safe_load((project / ".copier-answers.yml").read_text())[question]
