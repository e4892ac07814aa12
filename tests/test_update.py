"""Tier 4: `copier update` of generated plugins, as their authors and their CI run it.

Every scenario starts from a generated project committed in git, with the author's work in the
files the author owns (src/<pkg>/<kind>.py, tests/test_<kind>.py), and checks the ownership
rules of copier.yml (`_skip_if_exists`, the update-only `_exclude` entries):

- template-owned files follow the update, and equal a fresh copy with the same answers;
- author-owned files are byte-for-byte what the author left (every author line survives);
- a kind added on update gets its files; a dropped kind's edited files stay, and the closing
  message's command lists them;
- an update without a template change changes nothing;
- a recorded target stays until `--data vllm_target=`; `latest`, asked for, moves to the newest
  vLLM target; a `latest` an earlier release recorded as its default is pinned where it was;
- the names users type (entry points, the trace variable) survive an update from any release.

copier runs through its CLI with no terminal, as in CI: the newest copier (this environment's)
and the oldest the template supports (`_min_copier_version`, in a cached venv).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import copier as copier_api
import pytest
import yaml
from conftest import CATALOG, ROOT, VLLM, changed_method, instances
from realvllm import envs
from update import harness
from update.harness import Template

pytestmark = pytest.mark.update

KINDS4 = ["general", "model", "tool_parser", "reasoning_parser"]
MIN_COPIER = yaml.safe_load((ROOT / "copier.yml").read_text().split("\n---", 1)[0])[
    "_min_copier_version"
]
OTHER = sorted(t for t in VLLM["targets"] if t != VLLM["latest"])


def test_ownership_patterns_match_exactly_the_kind_files() -> None:
    """Author-owned = the per-instance files, switches.py, steps.py, tests/serve_plan.py,
    README.md and the package's __init__.py, nothing else the template writes. A template-owned
    tests/test_*.py must be negated in copier.yml, or updates would never refresh it."""
    settings = harness.copier_settings()
    replay_only = [m[1] for e in settings["_exclude"] if (m := harness.REPLAY_ONLY.fullmatch(e))]
    assert replay_only == settings["_skip_if_exists"], "_exclude's update-only entries drifted"
    package = "pkg"
    for path in sorted((ROOT / "template").rglob("*")):
        rel = path.relative_to(ROOT / "template").as_posix()
        out = re.sub(r"\{% if [^%]*%\}(.*?)\{% endif %\}", r"\1", rel.removesuffix(".jinja"))
        out = out.replace("{{ package_name }}", package)
        if not path.is_file() or "{% yield" in rel:
            continue
        # the author's switches and steps, serve plan, README (the PyPI page) and package,
        # and the CMake build of native modules (`build: cmake`), created once
        if out in (
            f"src/{package}/switches.py",
            f"src/{package}/steps.py",
            "tests/serve_plan.py",
            "README.md",
            f"src/{package}/__init__.py",
            "CMakeLists.txt",
        ):
            assert harness.is_author_owned(out, package), out
            continue
        assert not harness.is_author_owned(out, package), (
            f"template/{rel} is template-owned, yet copier.yml's _skip_if_exists makes it "
            f"author-owned: add '!{out}' there and to _exclude's update-only entries"
        )
    per_instance = [p for p in (ROOT / "template").rglob("*{% yield inst from instances %}*")]
    assert len(per_instance) == 2, per_instance
    modules = [*CATALOG, "tool_parser_acme_json", "model_acme_for_causal_lm"]
    for module in modules:
        for path in per_instance:
            rel = path.relative_to(ROOT / "template").as_posix().removesuffix(".jinja")
            rel = re.sub(r"\{% yield inst from instances %\}(.*?)\{% endyield %\}", r"\1", rel)
            out = rel.replace("{{ inst.module }}", module).replace("{{ package_name }}", package)
            assert harness.is_author_owned(out, package), out


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Template]:
    base = tmp_path_factory.mktemp("template")
    yield harness.snapshot(base / "vllm-plugin-template")
    shutil.rmtree(base, ignore_errors=True)


def fresh(template: Template, like: Path, dst: Path) -> dict[str, bytes]:
    """Template-owned files of a fresh copy at HEAD with the answers `like` has recorded."""
    copier_api.run_copy(
        str(template.path),
        dst,
        data={"vllm_oldest": "", **harness.answers(like)},  # `like`'s range: none unless recorded
        defaults=True,
        vcs_ref=template.head,
        quiet=True,
        unsafe=False,
    )
    return harness.template_owned(dst)


def assert_same(updated: dict[str, bytes], expected: dict[str, bytes]) -> None:
    assert sorted(updated) == sorted(expected), "template-owned files differ from a fresh copy"
    differ = [p for p in expected if updated[p] != expected[p]]
    assert not differ, f"template-owned files differ from a fresh copy: {differ}"


def assert_author_kept(project: Path, before: dict[str, bytes], added: dict[str, list[str]]):
    after = harness.author_owned(project)
    for rel, data in before.items():
        assert rel in after, f"update deleted the author's {rel}"
        assert after[rel] == data, f"update rewrote the author's {rel}"
        lines = after[rel].decode().splitlines()
        missing = [line for line in added.get(rel, []) if line not in lines]
        assert not missing, f"{rel} lost the author's lines {missing}"


def pin(project: Path) -> list[str]:
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    return pyproject["project"]["optional-dependencies"]["vllm"]


def requirement(series: str) -> list[str]:
    return [VLLM["targets"][series]["requirement"]]


@pytest.mark.parametrize("release", list(harness.RELEASES["releases"]))
def test_release_to_head(release: str, template: Template, tmp_path: Path) -> None:
    """A plugin of each recorded release, with the author's work, updated to HEAD: the
    author's files untouched, the template's equal to a fresh copy, and the message says
    nothing of kinds removed or of another vLLM target (neither changed)."""
    project = tmp_path / "plugin"
    kinds = harness.RELEASES["releases"][release]["kinds"]
    harness.copy(template, project, release, kinds=kinds)
    added = harness.edit_author_files(project)
    before = harness.author_owned(project)
    assert len(before) == 2 * len(kinds) + 2  # and README.md, src/<pkg>/__init__.py

    out = harness.update(project, "HEAD", "--skip-answered")

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, before, added)
    assert_same(harness.template_owned(project), fresh(template, project, tmp_path / "fresh"))
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())["_commit"]
    assert template.head.startswith(recorded.rsplit("-g", 1)[-1]), recorded
    assert "Updated " in out and "Yours, never rewritten" in out, out
    assert "git ls-files" not in out, out


def test_add_and_drop_kinds_and_latest_moves(template: Template, tmp_path: Path) -> None:
    """A plugin that asked for `latest` in a release whose latest was an older vLLM: the update
    adds a kind (its files created), drops one (its edited files kept and listed), and moves
    the pin."""
    if not template.older_latest:
        pytest.skip("the template has a single vLLM target")
    project = tmp_path / "plugin"
    harness.copy(
        template,
        project,
        template.older_latest,
        kinds=["general", "model", "tool_parser"],
        vllm_target="latest",
    )
    assert pin(project) == requirement(template.older_latest_series)
    added = harness.edit_author_files(project)
    before = harness.author_owned(project)
    dropped = next(m for k, m in instances(project).items() if k.startswith("tool_parser"))

    out = harness.update(project, "HEAD", kinds=["general", "model", "reasoning_parser"])

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, before, added)  # tool_parser's files included
    package = harness.answers(project)["package_name"]
    expected = fresh(template, project, tmp_path / "fresh")
    assert_same(harness.template_owned(project), expected)
    created = harness.author_owned(tmp_path / "fresh")
    module = instances(project)[next(k for k in instances(project) if k.startswith("reasoning"))]
    for rel in (f"src/{package}/{module}.py", f"tests/test_{module}.py"):
        assert harness.tree(project)[rel] == created[rel], rel
    assert pin(project) == requirement(VLLM["latest"])
    assert harness.answers(project)["vllm_target"] == "latest"

    # The closing message prints the command that lists what the dropped kind left behind,
    # and what differs from the vLLM target the plugin had.
    assert f"against {VLLM['targets'][template.older_latest_series]['version']}" in out, out
    command = next(line.strip() for line in out.splitlines() if "git ls-files" in line)
    listed = subprocess.run(
        command, shell=True, cwd=project, capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == [f"src/{package}/{dropped}.py", f"tests/test_{dropped}.py"], out


def test_default_target_stays_and_says_a_newer_one_exists(
    template: Template, tmp_path: Path
) -> None:
    """A plugin copied with the defaults a release ago records that release's newest target;
    an update keeps it (no byte of the vLLM pin moves) and says which newer target exists."""
    if not template.older_latest:
        pytest.skip("the template has a single vLLM target")
    project = tmp_path / "plugin"
    harness.copy(template, project, template.older_latest, kinds=["general"])
    assert harness.answers(project)["vllm_target"] == template.older_latest_series

    out = harness.update(project, "HEAD")

    assert harness.answers(project)["vllm_target"] == template.older_latest_series
    assert pin(project) == requirement(template.older_latest_series)
    newest = f"The template's newest target is vLLM {VLLM['targets'][VLLM['latest']]['version']}"
    assert newest in out and f"--data vllm_target={VLLM['latest']} moves there" in out, out
    assert " against " not in out, out  # the target did not change


def test_earlier_release_keeps_its_names_and_its_vllm(template: Template, tmp_path: Path) -> None:
    """A plugin of the previous release with an IO processor, `latest` recorded as that
    release's default: the update pins the vLLM it had, keeps the entry-point names and the
    trace variable its users type, and says how to follow `latest` on purpose; asked for,
    `latest` then moves it and stays."""
    project = tmp_path / "plugin"
    harness.copy(template, project, template.previous, kinds=["general", "io_processor"])
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    had = recorded.get("_vllm_series", "0.33")  # releases before _vllm_series resolved 0.33
    assert recorded["vllm_target"] == "latest", recorded
    before = tomllib.loads((project / "pyproject.toml").read_text())["project"]["entry-points"]
    package = recorded["package_name"]
    assert before["vllm.io_processor_plugins"] == {
        f"{package}_io_processor": f"{package}.io_processor:io_processor_qualname"
    }, before

    out = harness.update(project, "HEAD")

    assert not harness.conflict_markers(project), out
    answers = harness.answers(project)
    assert answers["vllm_target"] == had and pin(project) == requirement(had), answers
    assert 'It was "latest", an earlier release\'s default' in out, out
    after = tomllib.loads((project / "pyproject.toml").read_text())["project"]["entry-points"]
    assert after == before, after
    prefix = f"{package.upper()}_"  # the release's trace: <PACKAGE>_PLUGIN_TRACE
    assert answers["env_prefix"] == prefix and answers["trace_env"] == f"{prefix}PLUGIN_TRACE"
    glue = (project / "src" / package / "_plugin.py").read_text()
    assert f'"{prefix}PLUGIN_TRACE"' in glue, glue
    assert_same(harness.template_owned(project), fresh(template, project, tmp_path / "fresh"))
    harness.commit_all(project, "update")

    # Following the template is asked for once, then recorded: a plain update keeps following.
    out = harness.update(project, "HEAD", vllm_target="latest")
    assert pin(project) == requirement(VLLM["latest"]), out
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert recorded["vllm_target"] == "latest" and recorded["_vllm_follows_latest"] is True
    harness.commit_all(project, "follow latest")
    before_all = harness.tree(project)
    again = harness.update(project, "HEAD")
    assert harness.tree(project) == before_all, again


@pytest.fixture(scope="module")
def moved_target(
    template: Template, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, str]:
    """A plugin pinned to an older target, with the author's work, updated with
    `--data vllm_target=<latest>`: (project, fresh copy, update output)."""
    if not OTHER:
        pytest.skip("the template has a single vLLM target")
    base = tmp_path_factory.mktemp("moved")
    project = base / "plugin"
    harness.copy(template, project, "HEAD", kinds=KINDS4, vllm_target=OTHER[-1])
    added = harness.edit_author_files(project)
    before_all = harness.tree(project)
    before = harness.author_owned(project)

    out = harness.update(project, "HEAD", vllm_target=VLLM["latest"])

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, before, added)
    assert_same(harness.template_owned(project), fresh(template, project, base / "fresh"))
    # Only what the new target requires changed: the old and new template-owned files are two
    # fresh renders that differ in vllm_target alone, and the pin is among the changes.
    changed = {p for p, b in harness.tree(project).items() if before_all.get(p) != b}
    assert {"pyproject.toml", ".copier-answers.yml"} <= changed
    assert pin(project) == requirement(VLLM["latest"])
    assert f"vLLM {VLLM['targets'][VLLM['latest']]['version']}" in out, out
    harness.commit_all(project, "update to the latest target")
    return project, base / "fresh", out


def test_pinned_plugin_moves_only_when_asked(moved_target: tuple[Path, Path, str]) -> None:
    """The target moved with --data (checked in the fixture); a plain update then keeps the pin
    and, with no template change, changes no byte of a project full of the author's work."""
    project, _, out = moved_target
    assert harness.answers(project)["vllm_target"] == VLLM["latest"]
    # The message tells the author what the catalog says changed for their kinds.
    assert f"against {VLLM['targets'][OTHER[-1]]['version']}" in out, out
    assert "git ls-files" not in out, out  # no kind was removed
    before = harness.tree(project)

    again = harness.update(project, "HEAD")

    assert harness.tree(project) == before
    # Neither the kinds nor the target changed: no clean-up lines, no API differences.
    assert "git ls-files" not in again and " against " not in again, again
    assert harness.git(project, "status", "--porcelain", "--untracked-files=all") == ""


def test_updated_plugin_passes_its_suite_in_real_vllm(
    moved_target: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """The updated plugin (author's work included) in real vLLM: its own tests and lint, on the
    package that the author's own build backend builds (setuptools in hatchling's place, as in
    test_author_build_backend, which proves that an update keeps it)."""
    project = tmp_path / "plugin"
    shutil.copytree(moved_target[0], project)
    package = str(harness.answers(project)["package_name"])
    text = (project / "pyproject.toml").read_text()
    for old, new in BUILD_BACKEND.items():
        assert text.count(old.replace("PKG", package)) == 1, (old, text)
        text = text.replace(old.replace("PKG", package), new.replace("PKG", package))
    (project / "pyproject.toml").write_text(text)
    env = envs.ensure(VLLM["latest"])
    paths = envs.install_overlay(env, project, tmp_path / "site")
    (wheel,) = (tmp_path / "site").glob(f"{package}-*.dist-info/WHEEL")
    assert "Generator: setuptools" in wheel.read_text(), wheel.read_text()
    run_env = {
        **os.environ,
        **paths,
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
    }
    for cmd in (
        [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        [str(env.bin / "ruff"), "check", "."],
        [str(env.bin / "ruff"), "format", "--check", "."],
    ):
        proc = subprocess.run(
            cmd, cwd=project, env=run_env, capture_output=True, text=True, timeout=900
        )
        assert proc.returncode == 0, f"{cmd[-1]}:\n{(proc.stdout + proc.stderr)[-4000:]}"


def test_no_op_update_with_data_file_and_skip_answered(template: Template, tmp_path: Path) -> None:
    """examples/answers.yml through --data-file (with a --data override pinning the target);
    then an update with no template change and no answer change changes no byte."""
    project = tmp_path / "plugin"
    pinned = OTHER[-1] if OTHER else VLLM["latest"]
    harness.copier(
        "copy",
        "--defaults",
        "--vcs-ref",
        "HEAD",
        "--data-file",
        str(ROOT / "examples" / "answers.yml"),
        "--data",
        f"vllm_target={pinned}",
        "--data",
        "vllm_oldest=",  # the target alone (conftest.single_target)
        str(template.path),
        str(project),
    )
    example = yaml.safe_load((ROOT / "examples" / "answers.yml").read_text())
    recorded = harness.answers(project)
    assert {k: recorded[k] for k in example} == {**example, "vllm_target": pinned}
    harness.commit_all(project, "generated")
    before = harness.tree(project)

    # Every question answered: --skip-answered needs neither --defaults nor a terminal.
    harness.copier("update", "--skip-answered", "--vcs-ref", "HEAD", cwd=project)

    assert harness.tree(project) == before
    assert harness.git(project, "status", "--porcelain", "--untracked-files=all") == ""
    assert pin(project) == requirement(pinned)

    # Without either flag copier would ask again: no terminal, so a clear refusal, no change.
    proc = harness.copier("update", "--vcs-ref", "HEAD", cwd=project, check=False)
    assert proc.returncode != 0
    assert "Interactive session required" in proc.stdout + proc.stderr
    assert harness.tree(project) == before


def test_without_terminal_copier_says_what_to_pass(template: Template, tmp_path: Path) -> None:
    """No terminal and no --defaults: a clear one-line reason, and nothing written."""
    dst = tmp_path / "plugin"
    proc = harness.copier("copy", "--vcs-ref", "HEAD", str(template.path), str(dst), check=False)
    assert proc.returncode != 0
    assert "Interactive session required" in proc.stderr + proc.stdout
    assert "--defaults" in proc.stderr + proc.stdout
    assert not dst.exists()


def test_oldest_supported_copier(template: Template, tmp_path: Path) -> None:
    """_min_copier_version does the previous-release update with a kind added and one dropped,
    to the same result as the newest copier's fresh copy."""
    project = tmp_path / "plugin"
    kinds = harness.RELEASES["releases"][template.previous]["kinds"]
    harness.copy(template, project, template.previous, version=MIN_COPIER, kinds=kinds[:3])
    added = harness.edit_author_files(project)
    before = harness.author_owned(project)
    dropped, new = kinds[2], kinds[3]

    out = harness.update(project, "HEAD", version=MIN_COPIER, kinds=[*kinds[:2], new])

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, before, added)
    package = harness.answers(project)["package_name"]
    assert (project / "src" / str(package) / f"{dropped}.py").is_file()
    for key, module in instances(project).items():
        if key.partition(":")[0] == new:
            assert (project / "tests" / f"test_{module}.py").is_file()
    assert_same(harness.template_owned(project), fresh(template, project, tmp_path / "fresh"))
    version = harness.copier("--version", version=MIN_COPIER).stdout
    assert re.search(rf"\b{re.escape(MIN_COPIER)}\b", version), version


def test_instances_added_and_removed_on_update(template: Template, tmp_path: Path) -> None:
    """A kind with several instances: an update that adds one creates its module and test; one
    that removes one keeps its files (the author's code) and lists them; the others untouched."""
    project = tmp_path / "plugin"
    harness.copy(template, project, "HEAD", kinds=["general", "tool_parser"],
                 tool_parser_names=["acme", "beta"])  # fmt: skip
    assert set(instances(project)) == {"general", "tool_parser:acme", "tool_parser:beta"}
    added = harness.edit_author_files(project)
    before = harness.author_owned(project)

    out = harness.update(project, "HEAD", tool_parser_names=["acme", "gamma"])

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, before, added)  # beta's files included
    assert_same(harness.template_owned(project), fresh(template, project, tmp_path / "fresh"))
    package = harness.answers(project)["package_name"]
    assert (project / "src" / str(package) / "tool_parser_gamma.py").is_file()
    plugin = (project / "src" / str(package) / "_plugin.py").read_text()
    assert '"tool_parser:gamma"' in plugin and '"tool_parser:beta"' not in plugin
    command = next(line.strip() for line in out.splitlines() if "git ls-files" in line)
    listed = subprocess.run(
        command, shell=True, cwd=project, capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == [f"src/{package}/tool_parser_beta.py", "tests/test_tool_parser_beta.py"]


# The author's own edits to the template-owned pyproject.toml: a runtime dependency, a console
# script and a tool's table (where authors put them: the dependency list, tables at the end).
# Releases before issue 37 rendered the list on one line; since, a hand-added dependency goes
# below the list's "Yours" comment (apart from the lines of the `dependencies` answer).
HAND = "    # Yours, added here by hand:\n"
PYPROJECT_EDITS = {
    "dependencies = []": 'dependencies = ["numpy>=1.26"]',
    f"dependencies = [\n    # The `dependencies` answer:\n{HAND}": (
        f'dependencies = [\n    # The `dependencies` answer:\n{HAND}    "numpy>=1.26",\n'
    ),
}
PYPROJECT_TAIL = """
[project.scripts]
acme-info = "acme.cli:main"

[tool.mypy]
strict = true
"""


# A conflict copier left inline: (the project's side, the template's side).
CONFLICT = re.compile(
    r"(?ms)^<<<<<<< before updating\n(.*?)^=======\n(.*?)^>>>>>>> after updating\n"
)


def edit_pyproject(project: Path) -> list[str]:
    path = project / "pyproject.toml"
    text = path.read_text()
    edits = {old: new for old, new in PYPROJECT_EDITS.items() if old in text}
    assert len(edits) == 1, text
    for old, new in edits.items():
        text = text.replace(old, new)
    path.write_text(text.rstrip("\n") + "\n" + PYPROJECT_TAIL)
    harness.commit_all(project, "the author's packaging")
    added = [line for new in edits.values() for line in new.splitlines() if "numpy" in line]
    return [*added, *filter(None, PYPROJECT_TAIL.splitlines())]


@pytest.mark.parametrize("start", [*harness.RELEASES["releases"], "HEAD"])
def test_author_edits_to_pyproject_survive(start: str, template: Template, tmp_path: Path) -> None:
    """Every update scenario keeps the author's pyproject.toml edits, without a conflict: from
    each release to HEAD, and at HEAD with a kind added, an instance added and the target moved.
    One exception, once: a dependency added to the one-line list of a release before issue 37."""
    project = tmp_path / "plugin"
    kinds = harness.RELEASES["releases"][start]["kinds"] if start != "HEAD" else KINDS4[:3]
    target = OTHER[-1] if start == "HEAD" and OTHER else "latest"
    harness.copy(template, project, start, kinds=kinds, vllm_target=target)
    lines = edit_pyproject(project)

    if start == "HEAD":
        out = harness.update(
            project, "HEAD", kinds=[*kinds, "reasoning_parser"], vllm_target=VLLM["latest"],
            tool_parser_names=["acme", "beta"],
        )  # fmt: skip
    else:
        out = harness.update(project, "HEAD", "--skip-answered")

    text = (project / "pyproject.toml").read_text()
    if start != "HEAD":
        # The one-line list of the releases before issue 37, which the author's dependency
        # changed, conflicts once with today's layout, and nothing else does; resolved as the
        # author would, with their dependency below the list's "Yours" comment.
        assert harness.conflict_markers(project) == ["pyproject.toml"], out
        (conflict,) = CONFLICT.findall(text)
        assert conflict[0] == 'dependencies = ["numpy>=1.26"]\n', conflict
        text = CONFLICT.sub(lambda m: m[2].replace(HAND, f'{HAND}    "numpy>=1.26",\n'), text)
        (project / "pyproject.toml").write_text(text)
        lines = [line for line in lines if line != 'dependencies = ["numpy>=1.26"]']
        lines.append('    "numpy>=1.26",')
    else:
        assert not harness.conflict_markers(project), out
    assert [line for line in lines if line not in text.splitlines()] == [], text
    pyproject = tomllib.loads(text)
    assert pyproject["project"]["dependencies"] == ["numpy>=1.26"]
    assert pyproject["project"]["scripts"] == {"acme-info": "acme.cli:main"}
    assert pyproject["tool"]["mypy"] == {"strict": True}
    # A release's `latest` was its default, so the update pins the vLLM it had (0.33 for the
    # releases before `_vllm_series`); at HEAD the target moved on purpose.
    assert pin(project) == requirement(VLLM["latest"] if start == "HEAD" else "0.33")


def test_hand_added_and_answered_dependencies_merge(template: Template, tmp_path: Path) -> None:
    """Issue 37: a dependency and an extra added by hand to pyproject.toml, then others given as
    the `dependencies` and `optional_dependencies` answers on update: all of them, no conflict;
    the generated suite's conflict check (no vLLM needed) passes."""
    project = tmp_path / "plugin"
    harness.copy(template, project, "HEAD", kinds=["general"])
    path = project / "pyproject.toml"
    text = path.read_text()
    # "Yours" in dependencies, test, dev (indented) and below the extras
    assert text.count(HAND) == 3 and text.count(HAND.strip() + "\n") == 4, text
    text = text.replace(HAND, f'{HAND}    "numpy>=1.26",\n', 1)
    path.write_text(
        text.replace(
            "\n" + HAND.strip() + "\n", '\n# Yours, added here by hand:\nfast = ["orjson>=3"]\n'
        )
    )
    harness.commit_all(project, "the author's dependencies")

    out = harness.update(project, "HEAD", dependencies=["requests>=2"],
                         optional_dependencies="{speed: [uvloop>=0.19]}")  # fmt: skip

    assert not harness.conflict_markers(project), out
    pyproject = tomllib.loads(path.read_text())["project"]
    assert pyproject["dependencies"] == ["requests>=2", "numpy>=1.26"], pyproject
    extras = pyproject["optional-dependencies"]
    assert extras["speed"] == ["uvloop>=0.19"] and extras["fast"] == ["orjson>=3"], extras
    proc = generated_conflict_check(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# Issue 34: what an author writes in the files the template generates once (README.md, the
# PyPI page, and the package's __init__.py, its public API).
AUTHOR_README = "# Acme\n\nThe author's own introduction, as PyPI shows it.\n"
AUTHOR_INIT = '"""Acme: the public API."""\n\n__all__ = ["VERSION"]\n\nVERSION = "1.0"\n'


@pytest.mark.parametrize("edited", [True, False], ids=["edited", "untouched"])
def test_author_owns_readme_and_package_init(
    edited: bool, template: Template, tmp_path: Path
) -> None:
    """Issue 34: README.md and src/<pkg>/__init__.py are the author's. A plugin of the newest
    recorded release, where both were the template's, with the author's own README and
    __init__.py (edited) or the release's as generated (untouched): the update keeps both byte
    for byte, with no conflict marker, and brings the template's text as DEVELOPING.md; a
    further update that changes the project's name rewrites DEVELOPING.md only."""
    project = tmp_path / "plugin"
    harness.copy(template, project, template.previous, kinds=["general", "tool_parser"])
    package = str(harness.answers(project)["package_name"])
    readme, init = project / "README.md", project / "src" / package / "__init__.py"
    assert not (project / "DEVELOPING.md").exists()
    if edited:
        readme.write_text(AUTHOR_README)
        init.write_text(AUTHOR_INIT)
        harness.commit_all(project, "the author's README and public API")
    before = {path: path.read_bytes() for path in (readme, init)}

    out = harness.update(project, "HEAD", "--skip-answered")

    assert not harness.conflict_markers(project), out
    assert {path: path.read_bytes() for path in (readme, init)} == before
    developing = (project / "DEVELOPING.md").read_text()
    assert "## Update from the template" in developing and "You own `README.md`" in developing
    assert "README.md, src/" in out.split("Yours, never rewritten", 1)[1], out

    harness.commit_all(project, "updated")
    out = harness.update(project, "HEAD", project_name="Acme Tools")

    assert not harness.conflict_markers(project), out
    assert {path: path.read_bytes() for path in (readme, init)} == before
    assert (project / "DEVELOPING.md").read_text().startswith("# Developing Acme Tools\n")


def test_hand_added_test_and_dev_extras_merge(template: Template, tmp_path: Path) -> None:
    """Issue 34: requirements the author adds by hand to the `test` and `dev` extras, and
    others given as the `optional_dependencies` answer's `test` and `dev` (merged, not
    refused), survive an update to a later release that adds its own tool to each extra: no
    conflict marker, every line in its extra."""
    newer = dataclasses.replace(template, path=tmp_path / "template")
    harness.git(tmp_path, "clone", "-q", str(template.path), str(newer.path))
    project = tmp_path / "plugin"
    harness.copy(newer, project, "HEAD", kinds=["general"])
    path = project / "pyproject.toml"
    text = path.read_text()
    for extra, line in (("test", "hypothesis>=6"), ("dev", "ipython>=8")):
        block = re.search(rf"(?ms)^{extra} = \[\n.*?^\]\n", text)
        assert block and HAND in block[0], text
        text = text.replace(block[0], block[0].replace(HAND, f'{HAND}    "{line}",\n'))
    path.write_text(text)
    harness.commit_all(project, "the author's test and dev tools")
    # A later release of the template: one more tool in each extra, beside its own.
    jinja = newer.path / "template" / "pyproject.toml.jinja"
    source = jinja.read_text()
    for anchor, tool in (
        ('    "ruff>=0.6",\n', "pytest-timeout>=2"),
        ('    "pre-commit>=3",\n', "mypy>=1"),
    ):
        assert source.count(anchor) == 1, anchor
        source = source.replace(anchor, f'{anchor}    "{tool}",\n')
    jinja.write_text(source)
    harness.git(newer.path, "commit", "-q", "-am", "a later release: one more tool per extra")

    out = harness.update(
        project, "HEAD", optional_dependencies="{test: [pytest-cov>=5], dev: [build>=1]}"
    )

    assert not harness.conflict_markers(project), out
    extras = tomllib.loads(path.read_text())["project"]["optional-dependencies"]
    assert "pytest-timeout>=2" in extras["test"], extras
    assert extras["test"][-2:] == ["pytest-cov>=5", "hypothesis>=6"], extras
    assert "mypy>=1" in extras["dev"] and extras["dev"][-2:] == ["build>=1", "ipython>=8"], extras
    assert sorted(extras) == ["dev", "test", "vllm"], extras  # merged, no extra of their own
    proc = generated_conflict_check(project)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def generated_conflict_check(project: Path) -> subprocess.CompletedProcess[str]:
    """The generated suite's check for conflicts an update left, in this environment (no vLLM
    needed): the command the update's closing message gives."""
    command = "pytest pyproject.toml::no_update_conflicts"
    return subprocess.run(
        [sys.executable, "-m", *command.split(), "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(envs.kit_site())},  # the kit
    )  # fmt: skip


def test_a_conflict_an_update_left_is_named(template: Template, tmp_path: Path) -> None:
    """Issue 37: an update that leaves a conflict in a template-owned file the author edited
    says how to find it, and the generated suite's conflict check fails naming the file and the
    line of its first marker."""
    project = tmp_path / "plugin"
    harness.copy(template, project, "HEAD", kinds=["general"], project_name="Acme")
    doc = project / "DEVELOPING.md"
    assert doc.read_text().startswith("# Developing Acme\n")
    doc.write_text(
        doc.read_text().replace("# Developing Acme\n", "# Acme, the author's title\n", 1)
    )
    harness.commit_all(project, "the author's title")

    out = harness.update(project, "HEAD", project_name="Acme Tools")

    assert harness.conflict_markers(project) == ["DEVELOPING.md"], out
    assert "pytest pyproject.toml::no_update_conflicts" in out, out
    proc = generated_conflict_check(project)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "DEVELOPING.md:1: conflicts that copier update left; resolve each, then commit" in text


def test_patch_records_the_new_target_and_says_so(template: Template, tmp_path: Path) -> None:
    """A patch of a method whose parameters differ between two vLLM targets, updated from one
    to the other: _plugin.py (template-owned) records the new parameters, the author's edited
    patch module and test are kept, and the update's message names the change and the module
    to review."""
    import ast

    by_version = sorted(VLLM["targets"], key=lambda t: tuple(map(int, t.split("."))))
    old, new = by_version[0], by_version[-1]
    target, before, after = changed_method(old, new)
    project = tmp_path / "plugin"
    harness.copy(template, project, "HEAD", kinds=["patch"], vllm_target=old,
                 patch_targets=[target])  # fmt: skip
    added = harness.edit_author_files(project)
    owned = harness.author_owned(project)

    out = harness.update(project, "HEAD", vllm_target=new)

    assert not harness.conflict_markers(project), out
    assert_author_kept(project, owned, added)
    package = harness.answers(project)["package_name"]
    tree = ast.parse((project / "src" / str(package) / "_plugin.py").read_text())
    recorded = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "PATCH_RECORDED"
    )
    assert recorded == {target: after}, recorded
    assert f"{target} is {after} (vLLM {old}: {before}): review src/{package}/" in out, out


def _removed_apis(older: str, newer: str) -> dict[str, list[str]]:
    """{kind: the modules its catalog imported in `older` and `newer` no longer has}."""
    out: dict[str, list[str]] = {}
    for kind, entry in CATALOG.items():
        if {older, newer} <= set(entry["targets"]):
            now = {api["module"] for api in entry["apis"][newer].values()}
            gone = {
                api["module"]
                for name, api in entry["apis"][older].items()
                if name not in entry["apis"][newer] and api["module"] not in now
            }
            if gone:
                out[kind] = sorted(gone)
    return out


def test_update_across_a_removed_api_names_it(template: Template, tmp_path: Path) -> None:
    """A plugin of the kinds whose vLLM API the newest target removed or changed, made for the
    target before it, with the author's modules as generated there: the update names each
    removed module and changed option, and in the newest real vLLM the author's old module fails
    its suite with one line naming the module and both releases, not a collection error."""
    older, newer = OTHER[-1], VLLM["latest"]
    removed = _removed_apis(older, newer)
    if not removed:
        pytest.skip(f"vLLM {newer} removed no module that a kind of vLLM {older} imports")
    project = tmp_path / "plugin"
    kinds = ["general", *removed, "sleep_mode_backend"]
    harness.copy(template, project, "HEAD", kinds=kinds, vllm_target=older)
    env = envs.ensure(newer)
    run_env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}

    # Before the update, in the newer vLLM: the general plugin says so, in one line.
    paths = envs.install_overlay(env, project, tmp_path / "old-site")
    code = "from vllm.plugins import load_general_plugins; load_general_plugins()"
    proc = subprocess.run(
        [str(env.python), "-c", code],
        env={**run_env, **paths},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    version = VLLM["targets"][newer]["version"]
    said = [line for line in proc.stderr.splitlines() if f"not vLLM {version}" in line]
    assert len(said) == 1 and VLLM["targets"][older]["requirement"] in said[0], proc.stderr

    out = harness.update(project, "HEAD", vllm_target=newer)

    assert not harness.conflict_markers(project), out
    assert "no API your kinds import differs" not in out, out
    for kind, modules in removed.items():
        for module in modules:
            assert f"{kind}: gone in vLLM {newer}: `from {module} import" in out, out
    # An option with its own releases that holds in one of the two (kind.yml `note`).
    for form in CATALOG["sleep_mode_backend"]["suspend"].values():
        if (older in form["targets"]) != (newer in form["targets"]):
            assert f"sleep_mode_backend: {form['note']}" in out, out

    paths = envs.install_overlay(env, project, tmp_path / "site")
    proc = subprocess.run(
        [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not serve"],
        cwd=project,
        env={**run_env, **paths},
        capture_output=True,
        text=True,
        timeout=900,
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-4000:]
    assert "error during collection" not in text and "errors during collection" not in text, text
    for kind, modules in removed.items():
        for module in modules:
            line = f"{kind}: vLLM {newer} has no {module} (vLLM {older} had it)"
            assert line in text, text[-4000:]
    assert "::uses_a_removed_vllm_api - Failed: " in text, text[-4000:]
    # The author's backend still takes the older release's suspend argument: vLLM's loader
    # check names it against the running vLLM's interface.
    changed = [
        (f["param"], p["param"])
        for f in CATALOG["sleep_mode_backend"]["suspend"].values()
        for p in CATALOG["sleep_mode_backend"]["suspend"].values()
        if older in f["targets"] and newer in p["targets"] and f["param"] != p["param"]
    ]
    for old_param, new_param in changed:
        assert f"suspend takes ['{old_param}'], but vLLM {version} calls suspend({new_param})" in (
            text
        ), text[-4000:]


# Issue 34: the packaging an author owns in the template-owned pyproject.toml, edited by hand
# as the generated DEVELOPING.md says ("Your packaging"). PKG stands for the package's name.
TAGGED_VERSION = {
    'requires = ["hatchling>=1.27"]\n': 'requires = ["hatchling>=1.27", "hatch-vcs>=0.4"]\n',
    'version = "0.1.0"\n': 'dynamic = ["version"]\n',
    'packages = ["src/PKG"]\n': 'packages = ["src/PKG"]\n\n[tool.hatch.version]\nsource = "vcs"\n',
}
LATEST_PYTHON = VLLM["targets"][VLLM["latest"]]["python"]
# A target to move from with the same Python floor as the newest: the floor's line stays the
# template's (a vLLM that needs a newer Python rewrites it, DEVELOPING.md says).
SAME_FLOOR = [t for t in OTHER if VLLM["targets"][t]["python"] == LATEST_PYTHON]


def update_author_packaging(
    template: Template, project: Path, start: str, edits: dict[str, str],
    files: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """A plugin generated at `start` (a recorded release, or HEAD) whose author replaced each
    `old` of pyproject.toml by its `new` and added `files`, committed; then updated to HEAD,
    from a release as its answers stand, from HEAD with what authors change on an update (a
    kind and an instance added, the vLLM target moved, a new description and author), and
    committed. Asserts that no conflict marker is left and that each edit and file is there
    byte for byte."""
    head = start == "HEAD"
    kinds = KINDS4[:3] if head else harness.RELEASES["releases"][start]["kinds"]
    target = SAME_FLOOR[-1] if head and SAME_FLOOR else "latest"
    harness.copy(template, project, start, kinds=kinds, vllm_target=target)
    package = str(harness.answers(project)["package_name"])
    path = project / "pyproject.toml"
    text = path.read_text()
    edits = {old.replace("PKG", package): new.replace("PKG", package) for old, new in edits.items()}
    for old, new in edits.items():
        assert text.count(old) == 1, (old, text)
        text = text.replace(old, new)
    path.write_text(text)
    written = {rel.replace("PKG", package): body for rel, body in (files or {}).items()}
    for rel, body in written.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(body)
    harness.commit_all(project, "the author's packaging")
    before = {rel: (project / rel).read_bytes() for rel in written}

    if head:
        out = harness.update(
            project, "HEAD", kinds=[*kinds, "reasoning_parser"], vllm_target=VLLM["latest"],
            tool_parser_names=["acme", "beta"], description="Acme's plugin, described anew.",
            author_name="Acme Authors",
        )  # fmt: skip
    else:
        out = harness.update(project, "HEAD", "--skip-answered")

    assert not harness.conflict_markers(project), out
    text = path.read_text()
    assert [new for new in edits.values() if new not in text] == [], text
    assert {rel: (project / rel).read_bytes() for rel in written} == before
    if head:  # the answers' lines did change
        assert 'description = "Acme\'s plugin, described anew."' in text, text
        assert pin(project) == requirement(VLLM["latest"])
    harness.commit_all(project, "updated")


def built_wheel(project: Path, out: Path) -> Path:
    """The project's wheel, built as its users' pip builds it: build requirements from the
    package index, pip's configuration isolated (requires-python not checked: this is not
    the Python the wheel is for)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--ignore-requires-python",
         "--wheel-dir", str(out), "."],
        cwd=project, env=envs.isolated_pip_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


def wheel_metadata(wheel: Path) -> tuple[list[str], dict[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        return names, dict(Parser().parsestr(zf.read(meta).decode()).items())


def test_author_version_from_git_tags(template: Template, tmp_path: Path) -> None:
    """Issue 34: the version from git tags (hatch-vcs) instead of the static one survives an
    update that changes the lines around it, and the wheel built at tag v1.2.3 is 1.2.3."""
    project = tmp_path / "plugin"
    update_author_packaging(template, project, "HEAD", TAGGED_VERSION)
    harness.git(project, "tag", "v1.2.3")

    wheel = built_wheel(project, tmp_path / "dist")

    assert wheel.name.split("-")[1] == "1.2.3", wheel.name
    assert wheel_metadata(wheel)[1]["Version"] == "1.2.3"
    # The release workflow's tag check, run as GitHub runs it: the tag is the version.
    workflow = yaml.safe_load((project / ".github" / "workflows" / "release.yml").read_text())
    steps = workflow["jobs"]["build"]["steps"]
    (check,) = [s["run"] for s in steps if s.get("name") == "Check the tag against the version"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # tomllib's Python
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-c", check], cwd=project, capture_output=True,
        text=True, timeout=60, env={**os.environ, "GITHUB_REF_NAME": "v1.2.3", "PATH": path},
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (0, "Releasing 1.2.3\n"), proc.stdout + proc.stderr


def test_author_python_floor(template: Template, tmp_path: Path) -> None:
    """Issue 34: a Python floor above vLLM's survives an update (the target moved to one with
    the same floor); the wheel's metadata has it, and ruff takes it as its target."""
    project = tmp_path / "plugin"
    floor = f'requires-python = "{LATEST_PYTHON}"\n'
    assert LATEST_PYTHON != ">=3.13", "raise the author's floor below"
    update_author_packaging(template, project, "HEAD", {floor: 'requires-python = ">=3.13"\n'})

    assert wheel_metadata(built_wheel(project, tmp_path / "dist"))[1]["Requires-Python"] == (
        ">=3.13"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--show-settings", "pyproject.toml"],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "linter.unresolved_target_version = 3.13" in proc.stdout, proc.stdout


# Another top-level package with data of its own, data in the plugin's package (nothing to
# configure) and a file from outside the packages (hatchling's force-include).
EXTRA_PACKAGE = {
    'packages = ["src/PKG"]\n': (
        'packages = ["src/PKG", "src/PKG_extra"]\n\n'
        "[tool.hatch.build.targets.wheel.force-include]\n"
        '"data/vocab.txt" = "PKG/data/vocab.txt"\n'
    ),
}
EXTRA_FILES = {
    "src/PKG_extra/__init__.py": '"""Shared tables of the author\'s plugins."""\n',
    "src/PKG_extra/tables/ids.json": '{"acme": 1}\n',
    "src/PKG/data/prompts.txt": "Say hello.\n",
    "data/vocab.txt": "hello\nworld\n",
}
IN_WHEEL = ["PKG_extra/__init__.py", "PKG_extra/tables/ids.json", "PKG/data/prompts.txt",
            "PKG/data/vocab.txt", "PKG/__init__.py"]  # fmt: skip


@pytest.mark.parametrize("start", [next(iter(harness.RELEASES["releases"])), "HEAD"])
def test_author_extra_package_and_package_data(
    start: str, template: Template, tmp_path: Path
) -> None:
    """Issue 34: an extra top-level package and package data survive an update, from the
    oldest recorded release and from HEAD, and are in the wheel."""
    project = tmp_path / "plugin"
    update_author_packaging(template, project, start, EXTRA_PACKAGE, EXTRA_FILES)
    package = str(harness.answers(project)["package_name"])

    names = wheel_metadata(built_wheel(project, tmp_path / "dist"))[0]

    missing = [rel for rel in (r.replace("PKG", package) for r in IN_WHEEL) if rel not in names]
    assert missing == [], names


# Issue 36: the build backend is the author's ([build-system], DEVELOPING.md "Your packaging"):
# here setuptools in hatchling's place, with its own package table.
BUILD_BACKEND = {
    'requires = ["hatchling>=1.27"]\nbuild-backend = "hatchling.build"\n': (
        'requires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    'packages = ["src/PKG"]\n': (
        'packages = ["src/PKG"]\n\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    ),
}


@pytest.mark.parametrize("start", [next(iter(harness.RELEASES["releases"])), "HEAD"])
def test_author_build_backend(start: str, template: Template, tmp_path: Path) -> None:
    """Issue 36: a build backend of the author's survives an update, from the oldest recorded
    release and from HEAD, and builds the wheel vLLM loads: the package and its entry points."""
    project = tmp_path / "plugin"
    update_author_packaging(template, project, start, BUILD_BACKEND)
    package = str(harness.answers(project)["package_name"])
    backend = tomllib.loads((project / "pyproject.toml").read_text())["build-system"]
    assert backend["build-backend"] == "setuptools.build_meta", backend

    wheel = built_wheel(project, tmp_path / "dist")

    names = wheel_metadata(wheel)[0]
    assert f"{package}/__init__.py" in names, names
    (points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as zf:
        assert "[vllm.general_plugins]" in zf.read(points).decode(), names
