"""Run by tests/test_real_vllm_duplicates.py in a fresh process of a target's vLLM, with that
target's catalog api names as JSON (argv[1]): each registry kind's registry is given one new
name twice, with two different objects. Prints, per kind, "overwrite" (the registry holds the
second), "ignore" (it kept the first) or "raise <Exception>" (the second call raised).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

APIS: dict[str, dict[str, dict[str, str]]] = json.loads(sys.argv[1])
NAME = "vpt_dup"


def api(kind: str, key: str) -> Any:
    spec = APIS[kind][key]
    return getattr(importlib.import_module(spec["module"]), spec["name"])


def two(kind: str, base: str, **body: Any) -> dict[int, type]:
    """Two distinct subclasses of one of the kind's api classes."""
    return {i: type(f"C{i}", (api(kind, base),), dict(body)) for i in (1, 2)}


Probe = tuple[Callable[[int], Any], Callable[[], int]]  # register(i), which i is held


def lazy_factory(kind: str, factory: str, method: str) -> Probe:
    f = api(kind, factory)

    def held() -> int:  # a factory entry is a closure over the module path it imports
        return int(inspect.getclosurevars(f._registry[NAME]).nonlocals["module_path"][1:])

    return (lambda i: getattr(f, method)(NAME, f"m{i}", f"C{i}"), held)


def parser(kind: str, manager: str) -> Probe:
    m = api(kind, manager)
    return (
        lambda i: m.register_lazy_module(NAME, f"m{i}", f"C{i}"),
        lambda: int(m.lazy_parsers[NAME][0][1:]),
    )


def oot(kind: str, base: str) -> Probe:
    c = two(kind, base)
    name = f"VptDup{base}"  # ops and layers share one table
    return (
        lambda i: api(kind, base).register_oot(c[i], name=name),
        lambda: 1 if api(kind, "op_registry_oot")[name] is c[1] else 2,
    )


def model() -> Probe:
    r = api("model", "ModelRegistry")
    return (
        lambda i: r.register_model("VptDupForCausalLM", f"m{i}:C{i}"),
        lambda: int(r.models["VptDupForCausalLM"].module_name[1:]),
    )


def attention_backend() -> Probe:
    e = api("attention_backend", "AttentionBackendEnum")
    register = api("attention_backend", "register_backend")
    if not hasattr(e, "register"):  # no new names before AttentionBackendEnum.register: a member
        return (
            lambda i: register(e.CUSTOM, f"m{i}.C{i}"),
            lambda: int(e.CUSTOM.get_path().split(".")[0][1:]),
        )
    return (
        lambda i: register("VPT_DUP", f"m{i}.C{i}"),
        lambda: int(e["VPT_DUP"].get_path().split(".")[0][1:]),
    )


def quantization() -> Probe:
    c = two("quantization", "QuantizationConfig")
    return (
        lambda i: api("quantization", "register_quantization_config")(NAME)(c[i]),
        lambda: 1 if api("quantization", "get_quantization_config")(NAME) is c[1] else 2,
    )


def model_loader() -> Probe:
    c = two("model_loader", "BaseModelLoader")
    return (
        lambda i: api("model_loader", "register_model_loader")(NAME)(c[i]),
        lambda: 1 if api("model_loader", "load_formats")[NAME] is c[1] else 2,
    )


def config_parser() -> Probe:
    c = two("config_parser", "ConfigParserBase", parse=lambda self, *a, **k: ({}, None))
    get = api("config_parser", "get_config_parser")
    return (
        lambda i: api("config_parser", "register_config_parser")(NAME)(c[i]),
        lambda: 1 if type(get(NAME)) is c[1] else 2,
    )


def lora_resolver() -> Probe:
    c = two("lora_resolver", "LoRAResolver", resolve_lora=lambda self, base, name: None)
    registry = api("lora_resolver", "LoRAResolverRegistry")
    return (
        lambda i: registry.register_resolver(NAME, c[i]()),
        lambda: 1 if type(registry.get_resolver(NAME)) is c[1] else 2,
    )


def kv_cache_dtype() -> Probe:
    import torch

    c = {
        i: type(f"H{i}", (), {"name": NAME, "torch_dtype": lambda self: torch.uint8})
        for i in (1, 2)
    }
    get = api("kv_cache_dtype", "get_kv_cache_dtype_handler")
    return (
        lambda i: api("kv_cache_dtype", "register_kv_cache_dtype")(NAME)(c[i]),
        lambda: 1 if type(get(NAME)) is c[1] else 2,
    )


PROBES: dict[str, Callable[[], Probe]] = {
    "model": model,
    "tool_parser": lambda: parser("tool_parser", "ToolParserManager"),
    "reasoning_parser": lambda: parser("reasoning_parser", "ReasoningParserManager"),
    "custom_op": lambda: oot("custom_op", "CustomOp"),
    "pluggable_layer": lambda: oot("pluggable_layer", "PluggableLayer"),
    "attention_backend": attention_backend,
    "quantization": quantization,
    "model_loader": model_loader,
    "config_parser": config_parser,
    "kv_connector": lambda: lazy_factory(
        "kv_connector", "KVConnectorFactory", "register_connector"
    ),
    "ec_connector": lambda: lazy_factory(
        "ec_connector", "ECConnectorFactory", "register_connector"
    ),
    "kv_offload_spec": lambda: lazy_factory(
        "kv_offload_spec", "OffloadingSpecFactory", "register_spec"
    ),
    "sleep_mode_backend": lambda: lazy_factory(
        "sleep_mode_backend", "SleepModeBackendFactory", "register_backend"
    ),
    "lora_resolver": lora_resolver,
    "kv_cache_dtype": kv_cache_dtype,
}

seen: dict[str, str] = {}
for kind in APIS:
    register, held = PROBES[kind]()
    register(1)
    assert held() == 1, (kind, held())
    try:
        register(2)
    except Exception as e:
        seen[kind] = f"raise {type(e).__name__}"
    else:
        seen[kind] = "overwrite" if held() == 2 else "ignore"
print("SECOND " + json.dumps(seen))
