"""A kind is one folder (issue 38): in a copy of this repository, a new kind made as one folder
under extensions/ plus its id in extensions/vllm.yml, after the regeneration commands, passes
the catalog, docs and validation checks, and a plugin of it renders, installs its tests and
passes ruff. Nothing outside the folder, vllm.yml and the generated files is edited.

The new kind is a copy of `stat_logger` (an entry-point kind whose recipe is `ex.nothing()`)
under another id: every `stat_logger` inside the folder becomes `demo_logger`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT
from update.harness import GIT_ENV, git

NEW, LIKE = "demo_logger", "stat_logger"
# What one command per step regenerates after a kind folder is added (docs/maintaining.md).
REGENERATE = [["-m", "tools.catalog"], ["-m", "tools.docs"]]


def _copy_repository(dest: Path) -> None:
    """The working tree's tracked files (uncommitted edits included), as a new git repository
    with one commit: what copier reads as the template."""
    tracked = git(ROOT, "ls-files", "-z").split("\0")
    for rel in filter(None, tracked):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "copy")


def _add_kind(repo: Path) -> list[str]:
    """The new kind's folder and its id in vllm.yml; returns the paths written by hand."""
    folder = repo / "extensions" / NEW
    shutil.copytree(repo / "extensions" / LIKE, folder)
    for path in folder.rglob("*"):
        if path.is_file():
            path.write_text(path.read_text().replace(LIKE, NEW))
    vllm_yml = repo / "extensions" / "vllm.yml"
    text = vllm_yml.read_text()
    assert f"\n  - {LIKE}\n" in text
    vllm_yml.write_text(text.replace(f"\n  - {LIKE}\n", f"\n  - {LIKE}\n  - {NEW}\n", 1))
    return [f"extensions/{NEW}/", "extensions/vllm.yml"]


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> str:
    env = {**os.environ, **GIT_ENV, "PYTHONPATH": str(cwd)}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return proc.stdout


def test_a_new_kind_is_one_folder_and_its_id(tmp_path: Path) -> None:
    repo = tmp_path / "template"
    _copy_repository(repo)
    by_hand = _add_kind(repo)
    for step in REGENERATE:
        _run([sys.executable, *step], repo)
    git(repo, "add", "-A")
    changed = git(repo, "diff", "--cached", "--name-only").split()
    generated = {
        "extensions/catalog.json", "extensions/questions.yml", "docs/questions.md", "README.md"
    }  # fmt: skip
    outside = [
        p for p in changed
        if not p.startswith(tuple(by_hand)) and p not in generated
        and not p.startswith("docs/kinds/")
    ]  # fmt: skip
    assert outside == [], outside  # what adding the kind changed besides folder, id, generated
    assert f"docs/kinds/{NEW}.md" in changed
    git(repo, "commit", "-q", "-m", f"add {NEW}")

    # The catalog and docs checks, and the validation of the new kind's questions, in the copy.
    # Each of these goes through every kind of the catalog, the new one included.
    validation = [
        "test_every_free_text_question_is_validated",
        "test_defaults_never_collide_with_builtins",
        "test_valid_edge_answers_are_accepted",
    ]
    checks = ["tests/test_catalog.py", "tests/test_docs.py", "tests/test_validation.py"]
    checks += ["tests/test_question_order.py"]  # the new kind's questions where it is picked
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    select = " or ".join(["not test_validation", *validation])
    out = _run([*pytest_cmd, *checks, "-k", select, "-rA"], repo, 900)
    assert " failed" not in out and " error" not in out, out[-3000:]
    passed = {line.split()[1] for line in out.splitlines() if line.startswith("PASSED ")}
    assert {f"tests/test_validation.py::{t}" for t in validation} <= passed, out[-3000:]
    assert "tests/test_docs.py::test_every_kind_and_question_is_documented" in passed, passed
    order = "tests/test_question_order.py::test_follow_up_questions_come_in_the_pickers_order"
    assert order in passed, passed
    assert "extensions/questions.yml" in changed  # its include, after stat_logger's
    assert len(passed) >= 15, passed
    assert NEW in yaml.safe_load((repo / "extensions" / "vllm.yml").read_text())["kinds"]

    # A plugin of the new kind renders from the copy, as users run copier.
    project = tmp_path / "plugin"
    copier = shutil.which("copier") or str(Path(sys.executable).with_name("copier"))
    _run([copier, "copy", "--defaults", "--quiet", "--vcs-ref", "HEAD",
          "--data", f"kinds=[{NEW}]", str(repo), str(project)], tmp_path)  # fmt: skip
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    assert answers["kinds"] == [NEW]
    modules = list(answers["_instances"].values())
    assert modules and all((project / "tests" / f"test_{m}.py").is_file() for m in modules)
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    _run([ruff, "check", "."], project)
    _run([ruff, "format", "--check", "."], project)
