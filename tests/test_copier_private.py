"""Copier's private names, which the template reads in one place: copier.yml's `copier_replay`.

On update copier renders the previous release and the new one into temporary folders named
after its module and the replay; nothing public says which render is which. `copier_replay`
reads the folder name, once; the ownership rules (`_exclude`'s update-only entries) and
`previous` read `copier_replay`. These tests run the rules with the oldest copier the template
accepts (`_min_copier_version`, pyproject's lower bound) and the newest this environment has,
on a template of a few files built from copier.yml's own `copier_replay` and conditions.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import copier as copier_api
import pytest
import yaml
from conftest import ROOT
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from update import harness

SETTINGS = harness.copier_settings()
MIN_COPIER = SETTINGS["_min_copier_version"]
ALLOWED = SpecifierSet(
    next(
        r.removeprefix("copier")
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
        if r.startswith("copier")
    )
)
PRIVATE_NAMES = [".old_copy.", ".new_copy."]  # copier/_main.py's TemporaryDirectory prefixes
# The halves of the condition of `_exclude`'s update-only entries: an update, in its replay of
# the previous release, known by its data (the recorded `_commit`) or by `copier_replay`.
UPDATE = "_copier_operation == 'update'"
RECORDED = "'_commit' in _copier_conf.data"
PRIVATE = "copier_replay == 'old'"
CONDITION = f"{UPDATE} and ({RECORDED} or {PRIVATE})"
VARIANTS = {
    "copier.yml": CONDITION,
    "private": f"{UPDATE} and {PRIVATE}",
    "recorded": f"{UPDATE} and {RECORDED}",
}
COPIERS = {"oldest": MIN_COPIER, "newest": None}


def test_private_names_are_read_in_one_place() -> None:
    """Each private name is on one line of copier.yml, `copier_replay`'s; `_exclude`'s
    update-only entries all use CONDITION (the one the tests below run), and `previous` reads
    `copier_replay`. The oldest copier is pyproject's lower bound."""
    text = (ROOT / "copier.yml").read_text()
    for name in PRIVATE_NAMES:
        lines = [line for line in text.splitlines() if name.strip(".") in line]
        assert len(lines) == 1 and lines[0].lstrip().startswith("default:"), (name, lines)
    assert all(name in SETTINGS["copier_replay"]["default"] for name in PRIVATE_NAMES)
    conditions = {
        m[1]
        for entry in SETTINGS["_exclude"]
        if (m := re.fullmatch(r"\{% if (.*?) %\}.*\{% endif %\}", entry))
    }
    assert conditions == {CONDITION}, conditions
    assert "not copier_replay" in SETTINGS["previous"]["default"]
    lower = next(s.version for s in ALLOWED if s.operator == ">=")
    assert Version(MIN_COPIER) == Version(lower), (MIN_COPIER, str(ALLOWED))
    assert copier_api.__version__ in ALLOWED, (copier_api.__version__, str(ALLOWED))


def mini_template(path: Path) -> Path:
    """A template of a kind `b` to drop: one author-owned file per variant of the condition (and
    one with none, which an update deletes: the proof that the test can fail), and a probe
    that only copier's replay of the new release leaves out (so the update deletes it)."""
    excluded = [
        f"{{% if {cond} %}}owned_{name.replace('.', '_')}.txt{{% endif %}}"
        for name, cond in VARIANTS.items()
    ]
    config = {
        "_subdirectory": "template",
        "_templates_suffix": ".jinja",
        "_exclude": [
            "copier.yml",
            *excluded,
            f"{{% if {UPDATE} and copier_replay == 'new' %}}probe_new.txt{{% endif %}}",
        ],
        "_skip_if_exists": ["owned_*.txt"],
        "copier_replay": SETTINGS["copier_replay"],
        "kinds": {"type": "yaml", "default": ["a", "b"]},
    }
    (path / "template").mkdir(parents=True)
    (path / "copier.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name in [*VARIANTS, "none"]:
        stem = f"owned_{name.replace('.', '_')}"
        file = path / "template" / f"{{% if 'b' in kinds %}}{stem}.txt{{% endif %}}.jinja"
        file.write_text(f"{stem}: the template's line\n")
    (path / "template" / "kinds.txt.jinja").write_text("{{ kinds }}\n")
    (path / "template" / "probe_new.txt").write_text("probe\n")
    answers = path / "template" / "{{ _copier_conf.answers_file }}.jinja"
    answers.write_text("{{ _copier_answers | to_nice_yaml -}}\n")
    harness.commit_all(path, "mini template")
    return path


@pytest.mark.parametrize("which", list(COPIERS))
def test_an_update_keeps_a_dropped_kinds_author_files(which: str, tmp_path: Path) -> None:
    """With the oldest and the newest copier: `copier_replay` is "old" in the replay of the
    previous release (each half of the condition alone keeps the author's file of a dropped
    kind), and "new" in the replay of the new one (the probe it leaves out is deleted)."""
    version = COPIERS[which]
    template = mini_template(tmp_path / "template")
    project = tmp_path / "project"
    harness.copier("copy", "--defaults", "--vcs-ref", "HEAD", str(template), str(project),
                   version=version)  # fmt: skip
    harness.commit_all(project, "generated")
    assert (project / "kinds.txt").read_text() == "['a', 'b']\n"
    owned = sorted(p.name for p in project.glob("owned_*.txt"))
    assert len(owned) == len(VARIANTS) + 1, owned
    for name in owned:
        (project / name).write_text((project / name).read_text() + "the author's line\n")
    harness.commit_all(project, "the author's work")

    out = harness.copier("update", "--defaults", "--vcs-ref", "HEAD", "--data", "kinds=[a]",
                         cwd=project, version=version)  # fmt: skip

    assert (project / "kinds.txt").read_text() == "['a']\n", out
    kept = sorted(p.name for p in project.glob("owned_*.txt"))
    assert kept == sorted(n for n in owned if n != "owned_none.txt"), (kept, out)
    for name in kept:
        assert (project / name).read_text().endswith("the author's line\n"), name
    assert not (project / "probe_new.txt").exists(), out
    assert not list(project.rglob("*.rej")), out
    got = harness.copier("--version", version=version).stdout
    if version:
        assert re.search(rf"\b{re.escape(version)}\b", got), got
