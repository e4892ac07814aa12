"""Tier 2, models (issue 14): new model types, families and replacing a built-in, inside real
vLLM, in fresh processes (helpers in test_real_vllm.py; split so that xdist spreads tier 2
over the workers).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CATALOG, EXAMPLE_TARGETS, FAMILIES, NEW_MODEL_TYPE, render_file
from realvllm import envs
from test_real_vllm import ENV, _run, _suite_loaders_and_lint, answered

pytestmark = pytest.mark.real_vllm


# What examples/new-model-type.yml promises (issues 14, 36): a model type of its own in each
# family (text generation with an alias, pooling on BertModel, multimodal on PaliGemma, an EAGLE
# draft), each configuration a step of its own.
NEW_TYPE_STEPS = {
    f"model:{name}{step}"
    for name in (
        "Spark2_5ForCausalLM",
        "SparkRetrieverModel",
        "SparkVLForConditionalGeneration",
        "EagleSpark2_5ForCausalLM",
    )
    for step in ("", ":config")
}
NEW_TYPE_SCRIPT = """
import json, sys
from pathlib import Path
from vllm.plugins import load_general_plugins
from vllm.transformers_utils.config import get_config

checkpoint = Path(sys.argv[1])
load_general_plugins()
try:
    config = get_config(checkpoint, trust_remote_code=False)
except Exception as e:
    print("CONFIG " + json.dumps({"error": str(e).splitlines()[0]}))
else:
    print("CONFIG " + json.dumps({
        "class": f"{type(config).__module__}:{type(config).__name__}",
        "model_type": config.model_type,
        "model_code_imported": [m for m in sys.modules if m.startswith("acme_spark.model_")
                                and not m.endswith("_config")],
    }))
"""


# The example's EAGLE draft: vLLM reads the draft checkpoint's config.json (get_config), then
# speculative decoding wraps it in its EAGLEConfig, as SpeculativeConfig does for --speculative-
# config '{"method": "eagle", ...}'; the architecture it names resolves to the plugin's class.
DRAFT_SCRIPT = """
import json, sys
from vllm import ModelRegistry
from vllm.plugins import load_general_plugins
from vllm.transformers_utils.config import get_config
from vllm.transformers_utils.configs.eagle import EAGLEConfig

load_general_plugins()
draft = get_config(sys.argv[1], trust_remote_code=False)
eagle = EAGLEConfig(draft, method="eagle", model_type="eagle")
cls = ModelRegistry.models[eagle.architectures[0]].load_model_cls()
print("DRAFT " + json.dumps({
    "config": f"{type(eagle.model).__module__}:{type(eagle.model).__name__}",
    "architectures": eagle.architectures,
    "hidden_size": eagle.hidden_size,
    "class": f"{cls.__module__}:{cls.__name__}",
}))
"""


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_new_model_type_example_reads_its_checkpoints_through_vllm(
    target: str, tmp_path: Path
) -> None:
    """examples/new-model-type.yml: its suite, loader checks (each architecture, the alias and
    each configuration, lazily and idempotently) and lint pass; vLLM's own get_config reads
    a config.json of the new model type as the plugin's class, without importing model code;
    with the plugin not loaded, vLLM refuses that checkpoint naming the model type; the EAGLE
    draft's config.json of its own type is read and wrapped as speculative decoding does."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "spark", NEW_MODEL_TYPE, vllm_target=target)
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == {*NEW_TYPE_STEPS, "lazy"}, ok
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    config = {"architectures": ["Spark2_5LMHeadModel"], "model_type": "acme_spark2_5",
              "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1,
              "vocab_size": 256, "intermediate_size": 128}  # fmt: skip
    (checkpoint / "config.json").write_text(json.dumps(config))
    paths = envs.install_overlay(env, project, tmp_path / "site")
    script = [str(env.python), "-c", NEW_TYPE_SCRIPT, str(checkpoint)]
    read = json.loads(_run(script, tmp_path, paths).split("CONFIG ", 1)[1].splitlines()[0])
    assert read == {
        "class": "acme_spark.model_spark2_5_for_causal_lm_config:Spark2_5Config",
        "model_type": "acme_spark2_5",
        "model_code_imported": [],
    }, read
    alone = _run(script, tmp_path, {**paths, "VLLM_PLUGINS": ""})
    error = json.loads(alone.split("CONFIG ", 1)[1].splitlines()[0])["error"]
    assert "acme_spark2_5" in error, error
    draft = tmp_path / "draft"
    draft.mkdir()
    config.update(architectures=["EagleSpark2_5ForCausalLM"], model_type="acme_spark2_5_eagle")
    (draft / "config.json").write_text(json.dumps(config))
    out = _run([str(env.python), "-c", DRAFT_SCRIPT, str(draft)], tmp_path, paths)
    seen = json.loads(out.split("DRAFT ", 1)[1].splitlines()[0])
    assert seen == {
        "config": "acme_spark.model_eagle_spark2_5_for_causal_lm_config:EagleSpark2_5Config",
        "architectures": ["EagleSpark2_5ForCausalLM"],
        "hidden_size": 64,
        "class": "acme_spark.model_eagle_spark2_5_for_causal_lm:EagleSpark2_5ForCausalLM",
    }, seen


# A tiny BERT checkpoint of the example's pooling model type (the kit's tiny checkpoint is a
# Llama): random weights, the kit's tokenizer; config.json names the plugin's architecture and
# model type, which transformers alone cannot read.
BERT_SCRIPT = """
import json, sys
from pathlib import Path
from transformers import BertConfig, BertModel
from pytest_vllm_plugin.tiny import build_tokenizer

dest = Path(sys.argv[1])
tokenizer = build_tokenizer()
config = BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=128, max_position_embeddings=128,
                    pad_token_id=tokenizer.pad_token_id)
BertModel(config).save_pretrained(dest)
tokenizer.save_pretrained(dest)
data = json.loads((dest / "config.json").read_text())
data.update(architectures=["SparkRetrieverModel"], model_type="acme_spark_retriever")
(dest / "config.json").write_text(json.dumps(data))
"""
EMBED_SCRIPT = """
import json, sys
from vllm import LLM

if __name__ == "__main__":
    llm = LLM(model=sys.argv[1], runner="pooling", dtype="float32", max_model_len=64,
              enforce_eager=True)
    (out,) = llm.embed(["hello world"])
    config = llm.llm_engine.model_config.hf_config
    print("EMBED " + json.dumps({
        "dimensions": len(out.outputs.embedding),
        "config": f"{type(config).__module__}:{type(config).__name__}",
        "architectures": config.architectures,
    }))
"""


def embed_new_model_type(env: envs.VllmEnv, tmp_path: Path, **extra: str) -> dict[str, Any]:
    """examples/new-model-type.yml's retrieval model installed in `env`, a tiny BERT checkpoint
    of its model type embedded by vLLM (`--runner pooling`): what vLLM read and returned
    (tests/test_serve.py runs it: an engine start); {"error": ...} when vLLM fails."""
    tmp_path.mkdir(exist_ok=True)
    project = render_file(tmp_path / "spark", NEW_MODEL_TYPE, vllm_target=env.target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    checkpoint = tmp_path / "retriever"
    _run([str(env.python), "-c", BERT_SCRIPT, str(checkpoint)], tmp_path, paths)
    run = subprocess.run(
        [str(env.python), "-c", EMBED_SCRIPT, str(checkpoint)],
        cwd=tmp_path, env=dict(os.environ, **ENV, **paths, VLLM_CPU_KVCACHE_SPACE="1", **extra),
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    out = run.stdout + run.stderr
    if run.returncode == 0:
        return json.loads(out.split("EMBED ", 1)[1].splitlines()[0])
    return {"error": out[-3000:]}


# What examples/model-families.yml promises (issue 14): one architecture of each family beyond
# text generation (pooling twice: converted from a text-generation class, and native).
FAMILIES_PROMISED = {
    "model:AcmeEmbeddingModel": "pooling",
    "model:AcmeBertEmbeddingModel": "pooling",
    "model:AcmeVLForConditionalGeneration": "multimodal",
    "model:EagleAcmeForCausalLM": "draft",
}


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_model_families_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """examples/model-families.yml: each architecture's loader check (vLLM's registry resolves
    it lazily to the class, and the family's interface predicate holds: is_pooling_model,
    natively or once converted, supports_multimodal), its own test, and lint, in each target."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "families", FAMILIES, vllm_target=target)
    families = {f"model:{m['name']}": m["family"] for m in answered(project, "model_architectures")}
    assert families == FAMILIES_PROMISED, families
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == {*FAMILIES_PROMISED, "lazy"}, ok


REPLACE_SCRIPT = """
import logging, json
from vllm.plugins import load_general_plugins
from vllm import ModelRegistry
from transformers import AutoConfig

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("vllm.acme_replace").addHandler(handler)
load_general_plugins()
cls = ModelRegistry.models["LlamaForCausalLM"].load_model_cls()
config = AutoConfig.for_model("mistral")
print("REPLACED " + json.dumps({
    "LlamaForCausalLM": f"{cls.__module__}:{cls.__name__}",
    "mistral": f"{type(config).__module__}:{type(config).__name__}",
    "warnings": [r for r in records if "replaces" in r],
}))
"""


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_replace_serves_the_plugin_class_for_a_builtin_name(target: str, tmp_path: Path) -> None:
    """`replace: true` on purpose: vLLM's own LlamaForCausalLM and transformers' mistral model
    type now resolve, through vLLM's registry and AutoConfig, to the plugin's classes; each
    replacement logs one WARNING naming what it replaced and the package."""
    env = envs.ensure(target)
    answers = {
        "project_name": "Acme Replace",
        "kinds": ["model"],
        "model_architectures": [
            {"name": "LlamaForCausalLM", "replace": True},
            {"name": "AcmeMistralForCausalLM", "base": "MistralForCausalLM",
             "model_type": "mistral", "replace": True},
        ],
    }  # fmt: skip
    data = tmp_path / "replace.yml"
    data.write_text(json.dumps(answers))
    project = render_file(tmp_path / "replace", data, vllm_target=target)
    # (not the generated suite: the loader checks are the same code the examples' suites run)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    out = _run([str(env.python), "-c", REPLACE_SCRIPT], tmp_path, paths)
    seen = json.loads(out.split("REPLACED ", 1)[1].splitlines()[0])
    builtin = CATALOG["model"]["builtins"][target]["text_generation"]["LlamaForCausalLM"]
    assert seen == {
        "LlamaForCausalLM": "acme_replace.model_llama_for_causal_lm:LlamaForCausalLM",
        "mistral": "acme_replace.model_acme_mistral_for_causal_lm_config:AcmeMistralConfig",
        "warnings": [
            "acme_replace replaces vLLM's architecture LlamaForCausalLM"
            f" ({builtin}) with acme_replace.model_llama_for_causal_lm:LlamaForCausalLM",
            "acme_replace replaces the configuration of model type mistral with"
            " acme_replace.model_acme_mistral_for_causal_lm_config:AcmeMistralConfig",
        ],
    }, seen
