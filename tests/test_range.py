"""Tier 1: plugins that span a range of vLLM releases (issue 16), as rendered.

`vllm_oldest` makes a range from it to the target (`vllm_range` in copier.yml). What the range
changes is read from the catalog: the `vllm` extra's pin and Python, one CI job per release,
the README's list of what differs, and version-adaptive imports where an api entry moved
inside the range. The last is proven on a copy of the template whose catalog has an import
moved in an older release, since no api the fragments import moved between today's targets.
The range example itself runs in each release of its range in tier 2 (test_real_vllm.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import copier
import pytest
import yaml
from conftest import CATALOG, RANGE, ROOT, VLLM, range_of, render_file
from test_validation import copy_working_tree

from tools import catalog as catalog_tool

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
    assert sorted(j["wheel"] for j in jobs) == sorted(VLLM["targets"][t]["wheel"] for t in releases)
    steps = " ".join(str(s.get("run", "")) for s in workflow["jobs"]["test"]["steps"])
    assert "${{ matrix.wheel }}" in steps


def test_range_readme_lists_what_differs(range_project: Path) -> None:
    """Each kind mapping with its own releases that holds in part of the range is listed."""
    readme = (range_project / "README.md").read_text()
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
    assert "## vLLM releases" not in (project / "README.md").read_text()
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
    for dst, extra in ((plain, {}), (ranged, {"vllm_oldest": RELEASES[0]})):
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
    readme = (ranged / "README.md").read_text()
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
