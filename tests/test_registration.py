"""Issue 36 item 5: the registration kind, a registration call into any registry (vLLM's or
another plugin's). Tier 1: each bad element refused with one line, in the documented format;
both forms and all three ways of passing the class accepted and ruff-clean. Tier 2:
examples/registrations.yml in real vLLM 0.34 (vLLM's own lookup returns the class, idempotent
and lazy through the kit's fresh-process checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import copier
import pytest
import yaml
from conftest import ROOT, VLLM, render_file, single_target
from test_validation import Row, check_refusal, copy_working_tree, refused

EXAMPLE = ROOT / "examples" / "registrations.yml"
SPEC = "vllm.v1.worker.gpu.spec_decode.speculator_config"
QUANT = "vllm.model_executor.layers.quantization"
WT = "vllm.distributed.weight_transfer"
REG = {"kinds": ["registration"], "vllm_target": "0.34"}


def el(**details: Any) -> list[dict[str, Any]]:
    """One element: vLLM 0.34's speculative-method registry, with `details` changed."""
    base = {
        "name": "acme_ngram",
        "call": f"{SPEC}:register_speculative_method",
        "lookup": f"{SPEC}:get_custom_speculator_config_class",
        "pass_as": "module.Class",
    }
    return [{**base, **details}]


ROWS = [
    Row(
        "registration_calls",
        el(call="vllm.x.register"),
        "is not `module:qualname`",
        REG,
        shown="'vllm.x.register'",
    ),
    Row("registration_calls", el(lookup="get"), "is not `module:qualname`", REG, shown="'get'"),
    Row(
        "registration_calls",
        el(call="vllm.nowhere:register"),
        "is no vLLM module",
        REG,
        shown="'vllm.nowhere'",
    ),
    Row(
        "registration_calls",
        el(call=f"{SPEC}:register_method"),
        "is not defined there",
        REG,
        shown="'register_method'",
    ),
    # The decorator form passes one argument; the speculative registry needs two.
    Row(
        "registration_calls",
        el(form="decorator"),
        "positional argument",
        REG,
        shown="'vllm.v1.worker.gpu.sp...'",
        detail=True,
    ),
    # register_quantization_config(name) takes one: the call form passes two.
    Row(
        "registration_calls",
        el(call=f"{QUANT}:register_quantization_config", lookup=f"{QUANT}:get_quantization_config"),
        "positional argument",
        REG,
        shown="'vllm.model_executor.l...'",
        detail=True,
    ),
    Row(
        "registration_calls",
        el(lookup=f"{SPEC}:SpeculatorConfig"),
        "must name a function",
        REG,
        shown="'vllm.v1.worker.gpu.sp...'",
        detail=True,
    ),
    Row(
        "registration_calls",
        el(pass_as="string"),
        "not a way to pass the class",
        REG,
        shown="'string'",
    ),
    Row("registration_calls", el(form="call()"), "not a form of the call", REG, shown="'call()'"),
    Row(
        "registration_calls",
        el(base="vllm.config:Nothing"),
        "is no class",
        REG,
        shown="'vllm.config:Nothing'",
    ),
    Row("registration_calls", el(name='a"b'), "printable ASCII", REG, shown="'a\"b'", detail=True),
    Row("registration_calls", el() + el(), "is named twice", REG, shown="'acme_ngram'"),
    Row(
        "registration_calls",
        el(call="acme.general:register"),
        "the plugin's own code",
        REG,
        shown="'acme.general:register'",
    ),
    Row("registration_calls", el(replace=True), "cannot give `replace`", REG, shown="'acme_ngram'"),
    # Only a registry without a lookup of its own (the weight-transfer factories) may omit it.
    Row("registration_calls", el(lookup=""), "has no `lookup`", REG, shown="'acme_ngram'"),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_working_tree(tmp_path_factory.mktemp("template"))


@pytest.mark.parametrize("row", ROWS, ids=[r.fragment[:24] + str(i) for i, r in enumerate(ROWS)])
def test_bad_registration_refused(row: Row, template: Path, tmp_path: Path) -> None:
    data = {"project_name": "acme", **row.extra, row.key: row.value}
    check_refusal(row, refused(template, tmp_path / "plugin", data))
    assert not (tmp_path / "plugin").exists(), "a refused answer must write nothing"


def test_both_forms_and_every_way_of_passing_render_clean(template: Path, tmp_path: Path) -> None:
    """Decorator and call form, the class and both import strings, a registry outside vLLM (its
    module unchecked): rendered, ruff-clean, each row in the glue and a module each."""
    calls = [
        {
            "name": "q",
            "call": f"{QUANT}:register_quantization_config",
            "form": "decorator",
            "lookup": f"{QUANT}:get_quantization_config",
            "base": f"{QUANT}.base_config:QuantizationConfig",
        },
        el(name="s1", pass_as="module:Class")[0],
        el(name="s2", pass_as="class")[0],
        # vLLM's weight-transfer factories have no lookup: it is left out.
        {"name": "w1", "call": f"{WT}.factory:WeightTransferEngineFactory.register_engine"},
        {"name": "w2", "call": f"{WT}.factory:WeightTransferTrainerFactory.register_engine"},
        {
            "name": "other",
            "call": "other_plugin.registry:Schemes.register",
            "lookup": "other_plugin.registry:Schemes.get",
            "pass_as": "module.Class",
        },
    ]
    data = single_target({"project_name": "acme", **REG, "registration_calls": calls})
    copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    src = tmp_path / "p" / "src" / "acme"
    glue = (src / "_plugin.py").read_text()
    for name in ("q", "s1", "s2", "w1", "w2", "other"):
        assert f'"registration:{name}"' in glue, glue
    for factory in ("WeightTransferEngineFactory", "WeightTransferTrainerFactory"):
        assert f'"{WT}.factory:{factory}._registry",' in glue, glue
    assert f'"registration:w2": "{WT}.factory",' in glue  # waits for the factory's module
    assert '"registration:other": "other_plugin.registry",' in glue  # waits for its module
    assert "module:Class" in glue and '"decorator"' in glue
    assert (src / "registration_other.py").read_text().count("\nclass ") == 1
    ruff = str(Path(sys.executable).with_name("ruff"))
    for cmd in ([ruff, "check", "-q", "."], [ruff, "format", "-q", "--check", "."]):
        proc = subprocess.run(cmd, cwd=tmp_path / "p", capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.real_vllm
def test_registrations_example_passes_its_suite(tmp_path: Path) -> None:
    """examples/registrations.yml in vLLM 0.34: its suite (the switches and idempotency in fresh
    processes), vLLM's own lookup returning each class (loader check; for the weight-transfer
    engine, the factory's registry as `create_engine` reads it), lint."""
    from realvllm import envs
    from test_real_vllm import _suite_loaders_and_lint

    target = "0.34"
    assert target in VLLM["targets"]
    project = render_file(tmp_path / "registrations", EXAMPLE)
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    names = [c["name"] for c in answers["registration_calls"]]
    assert names == ["acme_ngram", "acme_shm"], answers
    # acme_shm gives no lookup: the check reads the weight-transfer factory's registry.
    checks = (project / "tests" / "vllm_checks.py").read_text()
    assert (
        "WeightTransferEngineFactory._registry"
        in (project / "src" / "acme_registrations" / "_plugin.py").read_text()
    )
    assert "found[name]()" in checks, checks
    ok = _suite_loaders_and_lint(envs.ensure(target), project, tmp_path / "site")
    assert ok == {"registration:acme_ngram", "registration:acme_shm", "lazy"}, ok


def test_every_registry_the_kind_reads_is_a_fact_checked_against_each_wheel() -> None:
    """kind.yml `lookups` names private mappings of vLLM's: each must be one of the kind's
    `facts` (tools.vllm_facts checks those against every target's wheel), in the module of the
    registering call."""
    spec = yaml.safe_load((ROOT / "extensions" / "registration" / "kind.yml").read_text())
    facts = {(f["path"], f["symbol"]) for f in spec["facts"]}
    assert spec["lookups"], spec
    for call, mapping in spec["lookups"].items():
        module, _, qualname = mapping.partition(":")
        assert call.partition(":")[0] == module, (call, mapping)
        assert (module.replace(".", "/") + ".py", qualname) in facts, mapping
