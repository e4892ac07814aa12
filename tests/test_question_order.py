"""Tier 1: the kinds' follow-up questions come in the order the kinds question lists the kinds.

The `kinds` multiselect lists the kinds in extensions/vllm.yml `kinds:` order (grouped by how
vLLM loads them). Copier asks the questions in the order copier.yml defines them, an `!include`d
file's in its place; and it reads a glob include in the order the file system lists the files
(`Path.glob`, unsorted), so `!include extensions/*/questions.yml` asked, on one machine, the
model loader's names before the model's architectures, and another order on another machine
(issue 37). copier.yml therefore includes extensions/questions.yml, which `python -m
tools.catalog` writes: one include per kind, in `kinds:` order. Adding a kind stays one folder
and its id in vllm.yml (tests/test_one_folder.py regenerates the file).

copier.yml is read here the way copier reads it (its `!include` tag, documents flattened, each
key where it first appears), without copier's private loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from conftest import CATALOG, ROOT, VLLM

COPIER_YML = ROOT / "copier.yml"


def _flatten(items: list[Any]) -> list[Any]:
    """Nested lists flattened, as copier's `lflatten` does with documents and includes."""
    return [x for item in items for x in (_flatten(item) if isinstance(item, list) else [item])]


def copier_questions() -> list[tuple[str, Path]]:
    """[(key, the file that defines it)] in the order copier asks them."""
    origin: dict[int, Path] = {}

    class Loader(yaml.SafeLoader):
        pass

    def include(loader: yaml.SafeLoader, node: yaml.Node) -> list[Any]:
        assert isinstance(node, yaml.ScalarNode)
        pattern = str(loader.construct_scalar(node))
        files = list(ROOT.glob(pattern))  # copier: template_root.glob(pattern), not sorted
        assert len(files) == 1, f"!include {pattern}: {len(files)} files; a glob has no order"
        docs = _flatten([d for d in yaml.load_all(files[0].read_bytes(), Loader=Loader) if d])
        for doc in docs:
            origin.setdefault(id(doc), files[0])
        return docs

    Loader.add_constructor("!include", include)
    order: dict[str, Path] = {}
    for doc in _flatten([d for d in yaml.load_all(COPIER_YML.read_bytes(), Loader=Loader) if d]):
        for key in doc:
            order.setdefault(key, origin.get(id(doc), COPIER_YML))
    return list(order.items())


def test_follow_up_questions_come_in_the_pickers_order() -> None:
    settings = yaml.safe_load(COPIER_YML.read_text().split("\n---", 1)[0])
    # The picker: the `kinds` question's choices, every kind of vllm.yml that the catalog has.
    assert "{%- for id in vllm.kinds if id in catalog %}" in settings["kinds"]["choices"]
    picker = [k for k in VLLM["kinds"] if k in CATALOG]

    questions = copier_questions()
    asked: list[str] = []  # each kind with questions, where its first question comes
    for key, path in questions:
        if path.name == "questions.yml" and path.parent.parent == ROOT / "extensions":
            kind = path.parent.name
            assert not asked or asked[-1] == kind or kind not in asked, f"{key}: {kind} split"
            if kind not in asked:
                asked.append(kind)
    with_questions = [
        k for k in picker if yaml.safe_load((ROOT / "extensions" / k / "questions.yml").read_text())
    ]
    assert asked == with_questions
    # Each kind's questions in its file's order, after the kinds question.
    keys = [key for key, _ in questions]
    for kind in with_questions:
        own = list(yaml.safe_load((ROOT / "extensions" / kind / "questions.yml").read_text()))
        assert [k for k in keys if k in own] == own, kind
        assert keys.index(own[0]) > keys.index("kinds"), kind


def test_the_generated_include_is_fresh() -> None:
    from tools.catalog import QUESTIONS, render_questions

    assert QUESTIONS.read_text() == render_questions(), "run: python -m tools.catalog"


def test_what_a_question_reads_is_asked_before_it() -> None:
    """A default or validator reads only answers copier has by then: `previous` (the recorded
    answers, which keep an update's names and vLLM target) before the target, and the trace
    variable after the prefix it starts with and before the settings, whose validator refuses
    a setting that would read it (issue 34)."""
    keys = [key for key, _ in copier_questions()]
    assert keys.index("previous") < keys.index("vllm_target") < keys.index("vllm_series")
    assert keys.index("env_prefix") < keys.index("trace_env") < keys.index("settings")
