"""Helpers for the update tests (tier 4): a template repository to update from and to, copier
runs through the CLI (so that any copier version can be used), and the ownership rules.

The template is never used in place: `snapshot()` clones this repository (full history) into a
temporary folder, commits the working tree there (uncommitted changes included, the way copier
itself treats a dirty local template at vcs_ref HEAD), and tags the recorded releases of
tests/update/releases.yml. Copies then name a ref of that clone, so the recorded `_commit` of
every generated project exists, and a no-op update really has no template change.
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec
import yaml
from packaging.version import Version
from pathspec import PathSpec
from realvllm.envs import CACHE

from tools import release

ROOT = Path(__file__).resolve().parents[2]
RELEASES = yaml.safe_load((Path(__file__).parent / "releases.yml").read_text())
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Plugin Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Plugin Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,  # no user hooks, signing or templates
    "GIT_CONFIG_NOSYSTEM": "1",
}
# What a copier run must never need: a terminal, a network, a trust prompt.
RUN_ENV = {**GIT_ENV, "NO_COLOR": "1", "COLUMNS": "200"}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def commit_all(project: Path, message: str) -> None:
    """The generated project as its author keeps it: a git repository with a clean tree."""
    if not (project / ".git").exists():
        git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "--allow-empty", "-m", message)


@dataclass(frozen=True)
class Template:
    path: Path
    head: str  # the working tree, committed
    previous: str  # tag of the previous release (tests/update/releases.yml)
    # A commit just before `head` whose `latest` is an older vLLM target, or "" when the
    # template has a single target: what a `latest` plugin looked like a release ago.
    older_latest: str
    older_latest_series: str


def snapshot(dest: Path) -> Template:
    if git(ROOT, "rev-parse", "--is-shallow-repository").strip() == "true":
        raise RuntimeError(
            "tier 4 needs the template's full history (it updates from recorded release "
            "commits): clone without --depth, or `git fetch --unshallow`"
        )
    git(ROOT.parent, "clone", "-q", "--no-hardlinks", str(ROOT), str(dest))
    # Commit the working tree as copier does for a dirty template: `git add -A` of ROOT's files
    # (ignored ones excluded) into the clone's index.
    wt = ["--git-dir", str(dest / ".git"), "--work-tree", str(ROOT)]
    git(dest, *wt, "add", "-A")
    git(dest, *wt, "commit", "-q", "--allow-empty", "--no-verify", "-m", "working tree")
    git(dest, "reset", "-q", "--hard")
    git(dest, "clean", "-qfdx")  # files the working tree deleted or renamed
    # The maintainer's own command tags the recorded releases (tools/release.py).
    release.tag(dest)
    # "latest" a release ago: the same template with `latest` on the previous target, then the
    # working tree again on top, so that HEAD's tree is exactly the working tree.
    vllm_yml = dest / "extensions" / "vllm.yml"
    text = vllm_yml.read_text()
    catalog = yaml.safe_load(text)
    older = [t for t in catalog["targets"] if t != catalog["latest"]]
    older_latest = ""
    if older:
        series = sorted(older, key=lambda t: tuple(map(int, t.split("."))))[-1]
        vllm_yml.write_text(re.sub(r"(?m)^latest: .*$", f'latest: "{series}"', text, count=1))
        _build_catalog(dest)
        git(dest, "commit", "-q", "-am", f"latest was {series}")
        older_latest = git(dest, "rev-parse", "HEAD").strip()
        git(dest, "revert", "--no-edit", "HEAD")
    # Packed, like any fetched repository: copier clones the template on every run, and a local
    # clone of ~700 loose objects costs 0.25 s more than one of a pack.
    git(dest, "repack", "-adq")
    return Template(
        path=dest,
        head=git(dest, "rev-parse", "HEAD").strip(),
        previous=RELEASES["previous"],
        older_latest=older_latest,
        older_latest_series=series if older else "",
    )


def _build_catalog(template: Path) -> None:
    """Rebuild the template's derived catalog (extensions/catalog.json) from its sources."""
    if (template / "tools" / "catalog.py").is_file():
        subprocess.run([sys.executable, "-m", "tools.catalog"], cwd=template, check=True)


def copier_cmd(version: str | None = None) -> list[str]:
    """The copier CLI: this interpreter's copier, or `version` from a cached venv."""
    if version is None:
        return [sys.executable, "-m", "copier"]
    venv = CACHE / f"copier-{version}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".lock-copier-{version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".ready").is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run(
                [
                    venv / "bin" / "python",
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    f"copier=={version}",
                ],
                check=True,
            )
            (venv / ".ready").write_text(f"copier=={version}\n")
    return [str(venv / "bin" / "python"), "-m", "copier"]


def copier(
    *args: str, cwd: Path | None = None, version: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the copier CLI without a terminal (stdin is not a tty), as CI does."""
    proc = subprocess.run(
        [*copier_cmd(version), *args],
        cwd=cwd,
        env={**os.environ, **RUN_ENV},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Python warnings from copier (`...: MissingFileWarning: ...`, a file the template reads
    # that is missing) reach every user; copier's own "Warning: Input is not a terminal" is
    # what a refused run without a terminal prints.
    assert not re.search(r"[a-z]Warning: ", proc.stderr), proc.stderr
    if check and proc.returncode:
        raise AssertionError(
            f"copier {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def data_args(data: dict[str, object]) -> list[str]:
    """`--data KEY=VALUE` for each answer; lists in YAML flow syntax (kinds=[a, b])."""
    out: list[str] = []
    for key, value in data.items():
        text = f"[{', '.join(map(str, value))}]" if isinstance(value, list) else str(value)
        out += ["--data", f"{key}={text}"]
    return out


def copy(
    template: Template, dst: Path, ref: str, version: str | None = None, **data: object
) -> str:
    """`copier copy --defaults` at `ref`, committed as the author's first commit; returns the
    CLI output. The target alone unless `data` gives a `vllm_oldest` (a release without the
    question takes the answer as data it does not read)."""
    data = {"vllm_oldest": "", **data}
    proc = copier(
        "copy",
        "--defaults",
        "--vcs-ref",
        ref,
        *data_args(data),
        str(template.path),
        str(dst),
        version=version,
    )
    commit_all(dst, "generated")
    return proc.stdout + proc.stderr


def update(project: Path, ref: str, *extra: str, version: str | None = None, **data: object) -> str:
    """`copier update --defaults` to `ref`; returns the CLI output (message included)."""
    proc = copier(
        "update",
        "--defaults",
        "--vcs-ref",
        ref,
        *data_args(data),
        *extra,
        cwd=project,
        version=version,
    )
    return proc.stdout + proc.stderr


def answers(project: Path) -> dict[str, object]:
    recorded = yaml.safe_load((project / ".copier-answers.yml").read_text())
    return {k: v for k, v in recorded.items() if not k.startswith("_")}


def tree(project: Path) -> dict[str, bytes]:
    """Every file of the project but git's own, by path relative to the project."""
    return {
        p.relative_to(project).as_posix(): p.read_bytes()
        for p in sorted(project.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(project).parts
    }


def copier_settings() -> dict[str, Any]:
    """The settings part of copier.yml (the document before the `!include` of kind questions)."""
    return yaml.safe_load((ROOT / "copier.yml").read_text().split("\n---", 1)[0])


# `{% if <old-copy replay> %}PATTERN{% endif %}`: the update-only `_exclude` entries.
REPLAY_ONLY = re.compile(
    r"\{%-? if _copier_operation == 'update' and .*? -?%\}(.*)\{%-? endif -?%\}"
)


@functools.cache
def author_patterns(package: str) -> PathSpec:
    """copier.yml's `_skip_if_exists`, rendered for `package`, matched the way copier does."""
    patterns = [
        p.replace("{{ package_name }}", package) for p in copier_settings()["_skip_if_exists"]
    ]
    kind = "gitignore" if Version(pathspec.__version__) >= Version("1.0.0") else "gitwildmatch"
    return PathSpec.from_lines(kind, patterns)


def is_author_owned(path: str, package: str) -> bool:
    """src/<pkg>/<kind>.py and tests/test_<kind>.py: created once, never rewritten."""
    return author_patterns(package).match_file(path)


def template_owned(project: Path) -> dict[str, bytes]:
    package = str(answers(project)["package_name"])
    return {p: b for p, b in tree(project).items() if not is_author_owned(p, package)}


def author_owned(project: Path) -> dict[str, bytes]:
    package = str(answers(project)["package_name"])
    return {p: b for p, b in tree(project).items() if is_author_owned(p, package)}


def edit_author_files(project: Path) -> dict[str, list[str]]:
    """The author's work: a helper in each kind module (and in the package's __init__.py), a
    test in each kind test, a section in README.md, and a line at the top of each; all
    lint-clean so the generated suite still passes. Returns the lines added, per file."""
    added: dict[str, list[str]] = {}
    for rel in author_owned(project):
        path = project / rel
        stem = re.sub(r"\W", "_", path.stem)
        top = f"# Author's note on {rel}: keep this line across updates."
        if rel.endswith(".md"):  # README.md: the author's own section
            top, tail = f"<!-- {top[2:]} -->", ["## The author's section", "", "Kept."]
        elif rel.startswith("tests/"):
            tail = [f"def test_author_{stem}() -> None:", f'    assert "{stem}"']
        else:
            tail = [f"def author_{stem}() -> str:", f'    return "author code in {rel}"']
        text = path.read_text()
        path.write_text(f"{top}\n{text.rstrip()}\n\n\n" + "\n".join(tail) + "\n")
        added[rel] = [top, *tail]
    commit_all(project, "the author's work")
    return added


def conflict_markers(project: Path) -> list[str]:
    found = []
    for rel, data in tree(project).items():
        if rel.endswith(".rej") or re.search(rb"(?m)^(<<<<<<<|>>>>>>>) ", data):
            found.append(rel)
    return found
