"""Tier 1: the catalog itself is complete and consistent."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import CATALOG, ROOT, VLLM

REQUIRED = {
    "id",
    "title",
    "summary",
    "mechanism",
    "targets",
    "processes",
    "loaded_when",
    "switch_on",
    "duplicate",
    "trap",
    "cpu",
    "api",
}
MECHANISM_KEY = {
    "general_plugin": "registry",
    "entry_point": "entry_point",
    "config_hook": "config_hook",
}


def test_every_kind_folder_is_indexed_and_every_indexed_kind_exists() -> None:
    folders = {p.parent.name for p in (ROOT / "extensions").glob("*/kind.yml")}
    assert folders == set(VLLM["kinds"])


def test_kind_entries_are_complete() -> None:
    for kind, entry in CATALOG.items():
        missing = REQUIRED - set(entry)
        assert not missing, f"{kind}: missing {sorted(missing)}"
        assert entry["id"] == kind
        assert set(entry["targets"]) <= set(VLLM["targets"]), kind
        assert MECHANISM_KEY[entry["mechanism"]] in entry, kind
        folder = ROOT / "extensions" / kind
        for fragment in (
            "questions.yml",
            "module.py.jinja",
            "check.py.jinja",
            "test_kind.py.jinja",
        ):
            assert (folder / fragment).is_file(), f"{kind}: no {fragment}"
        if entry["mechanism"] == "general_plugin":
            assert (folder / "register.py.jinja").is_file(), kind


def test_every_kind_records_facts_for_the_wheel_check() -> None:
    import yaml

    for kind in CATALOG:
        entry = yaml.safe_load((ROOT / "extensions" / kind / "kind.yml").read_text())
        assert entry.get("facts"), f"{kind}: no facts for tools.vllm_facts check"


def test_every_kind_has_builtins_for_each_of_its_targets() -> None:
    """builtins.json per target; a kind whose facts are another generated folder (`data:`, the
    patch kind's targets) has that folder's index per target instead."""
    for kind, entry in CATALOG.items():
        if "data" in entry:
            for target in entry["targets"]:
                assert (ROOT / "extensions" / entry["data"] / target / "index.json").is_file()
        else:
            assert set(entry["targets"]) <= set(entry["builtins"]), kind


def test_python_names_are_fresh() -> None:
    from tools.python_names import TARGET, build

    assert TARGET.read_text() == build(), "run: python -m tools.python_names"


def test_catalog_json_is_fresh() -> None:
    from tools.catalog import TARGET, render

    assert TARGET.read_text() == render(), "run: python -m tools.catalog"


def test_kind_questions_cost_little_when_their_kind_is_not_chosen() -> None:
    """Copier renders a skipped question's default (twice), casts it and formats its choices,
    unless the default is UNSET; and it renders every choice of an asked question on each run.
    So a kind's questions default to UNSET when the kind is not chosen, and offer at most 12
    choices (longer lists of built-in names are validated with `builtin_one`)."""
    import yaml

    for path in sorted(ROOT.glob("extensions/*/questions.yml")):
        for key, spec in (yaml.safe_load(path.read_text()) or {}).items():
            kind, default = path.parent.name, str(spec.get("default"))
            assert "UNSET" in default, f"{key}: default must be UNSET unless {kind}"
            assert f"'{kind}' not in kinds" in default or f"if '{kind}' in kinds" in default, (
                f"{key}: the default's UNSET guard must test '{kind}' in kinds"
            )
            choices = spec.get("choices")
            if isinstance(choices, list | dict):
                assert len(choices) <= 12, f"{key}: {len(choices)} choices; use builtin_one"
            for owner, field in re.findall(
                r"catalog\.(\w+)\.builtins\[vllm_series\]\.(\w+)", str(choices or "")
            ):
                for target, builtins in CATALOG[owner]["builtins"].items():
                    count = len(builtins.get(field, []))
                    assert count <= 12, f"{key}: {count} choices in {target}; use builtin_one"


def test_every_kind_says_how_many_instances_a_plugin_may_have() -> None:
    """A kind is answered by a list (`instances`: several per plugin), or says why vLLM allows
    only one per process (`once`). A list kind's answer, legacy keys and details are coherent:
    its list question exists, its old single answers are no longer questions, and its
    instance.jinja has the two macros the list's default and validator call."""
    import yaml

    questions: dict[str, Any] = {}
    for path in sorted(ROOT.glob("extensions/*/questions.yml")):
        questions.update(yaml.safe_load(path.read_text()) or {})
    for kind, entry in CATALOG.items():
        spec, once = entry.get("instances"), entry.get("once")
        assert bool(spec) != bool(once), f"{kind}: exactly one of `instances` and `once`"
        if once:
            continue
        assert spec["answer"] in questions, f"{kind}: no question {spec['answer']}"
        assert questions[spec["answer"]]["type"] == "yaml", spec["answer"]
        for old in (spec.get("legacy") or {}).values():
            assert old not in questions, f"{kind}: {old} is both legacy and a question"
        assert set(spec.get("legacy") or {}) <= {"name", *(spec.get("details") or {})}, kind
        opt_in = ["replace"] if (spec.get("replace") or {}).get("how") else []
        opt_in += ["entry_point"] if entry["mechanism"] == "entry_point" else []
        assert spec["args"] and set(spec["args"]) <= {
            "name", "module", "path", "cls", "key", *opt_in, *(spec.get("details") or {})
        }, kind  # fmt: skip
        # `replace`: how the kind's registry replaces a built-in (and its noun), or why it
        # cannot; every list kind says one of the two.
        replace = spec.get("replace") or {}
        assert bool(replace.get("how")) != bool(replace.get("cannot")), f"{kind}: replace"
        assert bool(replace.get("how")) == bool(replace.get("what")), f"{kind}: replace.what"
        macros = (ROOT / "extensions" / kind / "instance.jinja").read_text()
        assert "macro default_name(" in macros and "macro check(" in macros, kind


@pytest.mark.parametrize("kind", ["custom_op", "pluggable_layer"])
def test_every_replaceable_class_has_a_cpu_sample_or_a_reason(kind: str) -> None:
    """Each op or layer a plugin may replace (the classes vLLM builds, per target) gets a
    generated forward test that asserts (a `samples` entry, run for real by tier 2), or is
    listed in `no_sample` with why it cannot run in a CPU unit test; neither table names a class
    that no target builds. A new vLLM class therefore fails here until someone decides which."""
    entry = CATALOG[kind]
    samples, reasons = entry["samples"], entry.get("no_sample", {})
    assert not set(samples) & set(reasons), set(samples) & set(reasons)
    selectable = set()
    for target in entry["targets"]:
        b = entry["builtins"][target]
        dupes = b.get("duplicates") or {}
        selectable |= {n for n in b["names"] if n not in dupes and not n.startswith("_")}
    assert selectable - set(samples) - set(reasons) == set(), "no sample and no reason"
    assert set(samples) | set(reasons) <= selectable, "names no class a target builds"
    assert all(isinstance(r, str) and r and "\n" not in r for r in reasons.values())


def test_patch_instead_prefixes_are_vllm_modules() -> None:
    """The patch kind's `instead:` table (hand-written: where vLLM has a registry) names module
    prefixes that exist in every target's extracted targets data, and kinds of the catalog."""
    entry = CATALOG["patch"]
    for target in entry["targets"]:
        index = ROOT / "extensions" / entry["data"] / target / "index.json"
        modules = json.loads(index.read_text())["modules"]
        for prefix, alt in entry["instead"].items():
            assert prefix in modules, (target, prefix)
            assert alt["kind"] in CATALOG, alt
