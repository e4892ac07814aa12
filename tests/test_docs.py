"""Tier 1: docs/questions.md and docs/kinds/*.md are what `python -m tools.docs` writes now.

The pages are generated from the catalog (kind.yml, builtins.json, questions.yml, copier.yml,
validate.jinja); a change to any of them without regenerating fails here.
"""

from __future__ import annotations

import re

from conftest import CATALOG, ROOT

from tools import docs


def test_docs_are_up_to_date() -> None:
    pages = docs.generate()
    stale = docs.stale(pages)
    assert not stale, f"stale docs: {stale}; run `{docs.REGENERATE}` and commit docs/"


def test_every_kind_and_question_is_documented() -> None:
    pages = docs.generate()
    names = {path.name for path in pages}
    assert {f"{kind}.md" for kind in CATALOG} <= names
    assert {"questions.md", "README.md"} <= names
    questions = next(text for path, text in pages.items() if path.name == "questions.md")
    vllm, catalog = docs.load_catalog()
    for key, _kind, _spec in docs.load_questions(catalog, list(catalog)):
        assert f"\n## {key}\n" in questions, key
    index = next(text for path, text in pages.items() if path.name == "README.md")
    for kind in CATALOG:
        assert f"({kind}.md)" in index, kind


def test_every_validator_macro_has_a_documented_rule() -> None:
    """Each public validator macro says its rule, so docs/questions.md can show it."""
    source = (docs.ROOT / "extensions" / "validate.jinja").read_text()
    macros = set(re.findall(r"\{%-?\s*macro (\w+)\(", source))
    # Not validators:
    helpers = {"first_valid", "kind_help", "show", "own_variables", "entry_point_object"}
    validators = {m for m in macros if not m.startswith("_")} - helpers
    assert validators <= set(docs.validator_rules()), validators - set(docs.validator_rules())


def _schema_names() -> set[str]:
    """The file and folder names extensions/README.md's tree describes under `<kind>/`."""
    text = (ROOT / "extensions" / "README.md").read_text()
    tree = text.split("  <kind>/\n", 1)[1].split("```", 1)[0]
    return {m.rstrip("/") for m in re.findall(r"^    (\S+)", tree, re.M)}


def test_the_schema_describes_every_fragment_a_kind_folder_has() -> None:
    # Every name in any extensions/<kind>/ folder is in the schema, and the schema names only
    # files some kind has: CONTRIBUTING-KINDS.md and the schema stay true as the kind pages do.
    present = {
        p.name for kind_yml in (ROOT / "extensions").glob("*/kind.yml")
        for p in kind_yml.parent.iterdir() if p.name != "__pycache__"
    }  # fmt: skip
    described = _schema_names()
    assert present - described == set(), f"not in extensions/README.md: {present - described}"
    assert described - present == set(), f"no kind has: {described - present}"


def test_contributing_kinds_names_no_machine_path() -> None:
    text = (ROOT / "docs" / "CONTRIBUTING-KINDS.md").read_text()
    for path in ("/root", "/work", "/tmp", "~/.cache/vllm-plugin-template/dev-", "/home/"):
        assert path not in text, path


def test_every_validated_question_documents_its_own_rule() -> None:
    """docs/questions.md shows each validator's rule, a macro imported under another name
    (`import env_prefix as rule`) included: a validated question never reads "none", and one
    whose validator calls a rule macro shows that macro's rule, not only the shared checks."""
    vllm, catalog = docs.load_catalog()
    rules = docs.validator_rules()
    shared = {"given"}  # the check every shared question runs first
    for key, kind, spec in docs.load_questions(catalog, list(catalog)):
        if not spec.get("validator"):
            continue
        lines = docs.validation_text(spec, rules, kind)
        assert lines != ["none"], key
        called = set(re.findall(r"\b(\w+)\(", spec["validator"])) - shared
        if called & set(rules) or re.search(r"\bas \w+\b", spec["validator"]):
            assert any(not line.startswith("`given`") for line in lines), (key, lines)


def test_the_pages_show_no_template_source() -> None:
    """A Jinja comment or tag inside a validator or help string is not copied into the pages
    as if it were the rule (docs/questions.md once showed a `{#- ... #}` comment as the
    platform_device_name refusal)."""
    for path, text in docs.generate().items():
        for marker in ("{#", "#}", "{%", "%}"):
            assert marker not in text, f"{path.name}: {marker!r} at {text.find(marker)}"
