"""Follow vLLM releases from the wheel source: `python -m tools.vllm_facts extract|check|diff`.

- `extract [--target T ...]` writes extensions/<kind>/builtins.json: vLLM's built-in names
  per target, read from the target's wheel (targets.<t>.wheel in extensions/vllm.yml).
- `check [--target T ...] [--wheel PATH --as T]` verifies every kind.yml `facts:` and `api:`
  entry and every builtins.json against the wheels; exit 1 with one line per problem.
- `diff FROM TO` (targets or wheel paths) reports the drift between two releases, per kind.

vLLM is never imported: the wheel is opened with zipfile and its sources read with ast, so
this runs anywhere with Python 3.11 + PyYAML. RECIPES below is the one place that says where
each kind's built-in names live in vLLM's source.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools import extractors as ex
from tools import pyread
from tools.facts import (
    Catalog,
    api_entry,
    applies,
    check_api,
    check_fact,
    compare_descriptions,
    compare_objects,
    describe,
    load_catalog,
    resolve_api,
)
from tools.wheelsrc import FactsError, Wheel, load_wheel, wheel_for_spec

GENERATED_BY = "python -m tools.vllm_facts extract"
DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "extensions"
RECIPE_HOME = "extraction recipes live in RECIPES in tools/vllm_facts.py"


@dataclass(frozen=True)
class Recipe:
    """Where one kind's built-in names come from. `names` gives the `names` list; `extras` the
    kind's other fields; `present` says whether the kind exists in a wheel at all."""

    what: str
    names: ex.Values
    extras: dict[str, ex.Values] = field(default_factory=dict)
    present: Callable[[Wheel], bool] | None = None


# Paths inside the wheel, shared by several recipes.
MODELS = "vllm/model_executor/models/registry.py"
QUANT = "vllm/model_executor/layers/quantization/__init__.py"
ATTN = "vllm/v1/attention/backends/registry.py"
CPU_PLATFORM = "vllm/platforms/cpu.py"
CUSTOM_OP = "vllm.model_executor.custom_op"
CACHE = "vllm/config/cache.py"
V1_LOGITSPROCS = "vllm/v1/sample/logits_processor/__init__.py"  # up to vLLM 0.33


def _built_classes(what: str, cls: str, fields: tuple[str, ...]) -> Recipe:
    """The classes vLLM builds from `cls` (CustomOp, PluggableLayer), which a plugin replaces
    by class name (extractors.built_subclasses), with the given extra views."""
    return Recipe(
        what,
        ex.built_subclasses(CUSTOM_OP, cls, "names"),
        {field: ex.built_subclasses(CUSTOM_OP, cls, field) for field in fields},
    )


# What a patch may target (extensions/patch/targets/<target>/, read by the patch kind only):
# every module, class, function and attribute of the wheel, with each function's signature.
PATCH_TARGETS = ex.patch_targets()
# A shard of the targets data is one module group (the first two parts of the module name, or
# three where two make a file larger than this), so a render loads only the group it needs.
PATCH_SHARD_BYTES = 200_000


def patch_shards(targets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The files of one target's patch-targets data: {file name: text}. `index.json` maps each
    module to its shard; a shard holds {module: {qualname: what}}, one module a line."""

    def line(module: str) -> str:
        return json.dumps(module) + ": " + json.dumps(targets[module], separators=(",", ":"))

    def group(module: str, parts: int) -> str:
        return ".".join(module.split(".")[:parts])

    def sizes(parts: int, modules: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for module in modules:
            out[group(module, parts)] = out.get(group(module, parts), 0) + len(line(module))
        return out

    shard_of: dict[str, str] = {}
    two = sizes(2, sorted(targets))
    for module in sorted(targets):
        shard_of[module] = group(module, 2 if two[group(module, 2)] <= PATCH_SHARD_BYTES else 3)
    # A group still too large (the models: hundreds of modules in one package) is cut into
    # runs of modules in name order, each at most PATCH_SHARD_BYTES: <group>.<n>.
    by_shard: dict[str, list[str]] = {}
    for module, shard in shard_of.items():
        by_shard.setdefault(shard, []).append(module)
    for shard, modules in by_shard.items():
        if sum(len(line(m)) for m in modules) > PATCH_SHARD_BYTES:
            n, used = 1, 0
            for module in modules:
                if used and used + len(line(module)) > PATCH_SHARD_BYTES:
                    n, used = n + 1, 0
                used += len(line(module))
                shard_of[module] = f"{shard}.{n}"
    files: dict[str, list[str]] = {}
    for module, shard in shard_of.items():
        files.setdefault(shard, []).append(line(module))
    out = {f"{shard}.json": "{\n" + ",\n".join(lines) + "\n}\n" for shard, lines in files.items()}
    out["index.json"] = dump({"generated_by": GENERATED_BY, "modules": shard_of})
    return out


def write_patch_targets(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """Writes extensions/patch/targets/<target>/ from the wheel; the paths it changed."""
    folder = catalog.root / catalog.kinds["patch"]["data"] / target
    files = patch_shards(PATCH_TARGETS(wheel))
    changed = []
    folder.mkdir(parents=True, exist_ok=True)
    for stale in sorted(set(p.name for p in folder.glob("*.json")) - set(files)):
        (folder / stale).unlink()
        changed.append(str(folder / stale))
    for name, text in files.items():
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(str(path))
    return changed


def check_patch_targets(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """extensions/patch/targets/<target>/ against a fresh extraction from the wheel."""
    home = catalog.kinds["patch"]["data"]
    folder = catalog.root / home / target
    files = patch_shards(PATCH_TARGETS(wheel))
    stored = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
    stale = sorted(n for n in files if n not in stored or (folder / n).read_text() != files[n])
    stale += sorted(stored - set(files))
    if not stale:
        return []
    return [
        f"kind patch: {home}/{target}: {len(stale)} files differ from {wheel.label}"
        f" (first {stale[0]}; run {GENERATED_BY})"
    ]


POOLING_TABLES = (
    "_EMBEDDING_MODELS",
    "_LATE_INTERACTION_MODELS",
    "_REWARD_MODELS",
    "_TOKEN_CLASSIFICATION_MODELS",
    "_SEQUENCE_CLASSIFICATION_MODELS",
)
TEXT_GENERATION = ex.module_class_map(
    MODELS, "_TEXT_GENERATION_MODELS", "vllm.model_executor.models"
)

RECIPES: dict[str, Recipe] = {
    "general": Recipe(
        "vLLM's own vllm.general_plugins entry-point names (the wheel's entry_points.txt)",
        ex.entry_point_names("vllm.general_plugins"),
    ),
    "model": Recipe(
        "architectures in _VLLM_MODELS (vllm/model_executor/models/registry.py); text_generation: "
        "_TEXT_GENERATION_MODELS as arch -> module:Class; oot_supported: _OOT_SUPPORTED_MODELS; "
        "model_types: the config.json model types vLLM's _CONFIG_REGISTRY "
        "(vllm/transformers_utils/config.py) or transformers' CONFIG_MAPPING_NAMES know, at the "
        "lowest transformers the wheel requires; base_configs: text-generation arch -> the "
        "transformers configuration class of its causal-LM model type (MODEL_FOR_CAUSAL_LM_"
        "MAPPING_NAMES); config_registry: the model types of _CONFIG_REGISTRY alone (vLLM reads "
        "them before asking transformers); pooling, multimodal, draft: arch -> module:Class of "
        "the pooling tables (embedding, late interaction, reward, token and sequence "
        "classification), _MULTIMODAL_MODELS and _SPECULATIVE_DECODING_MODELS",
        ex.constant(MODELS, "_VLLM_MODELS"),
        {
            "text_generation": TEXT_GENERATION,
            "oot_supported": ex.optional(ex.constant(MODELS, "_OOT_SUPPORTED_MODELS")),
            "model_types": ex.model_types(),
            "config_registry": ex.config_registry(),
            "pooling": ex.module_class_maps(MODELS, POOLING_TABLES, "vllm.model_executor.models"),
            "multimodal": ex.module_class_map(
                MODELS, "_MULTIMODAL_MODELS", "vllm.model_executor.models"
            ),
            "draft": ex.module_class_map(
                MODELS, "_SPECULATIVE_DECODING_MODELS", "vllm.model_executor.models"
            ),
            "base_configs": ex.base_configs(TEXT_GENERATION),
        },
    ),
    "custom_op": _built_classes(
        "class names of the CustomOp subclasses vLLM builds (every subclass, at any depth, of "
        "vllm.model_executor.custom_op.CustomOp that vLLM's source uses as a value: "
        "CustomOp.__new__ looks up the __name__ of the class being built, so these are the "
        "register_oot keys that take effect); op_names: class -> op name (its own or inherited "
        "@CustomOp.register name); modules: class -> defining module; duplicates: a class name "
        "defined in several modules; bases_only: classes vLLM only subclasses -> the built "
        "subclasses below them; own_forward: class -> the class of its chain defining forward "
        "(so CustomOp's dispatch to forward_native/forward_cpu may not run). The separate "
        "CustomOp copy in vllm/model_executor/hw_agnostic/ is another registry, not counted",
        "CustomOp",
        ("op_names", "modules", "duplicates", "bases_only", "own_forward"),
    ),
    "pluggable_layer": _built_classes(
        "class names of the PluggableLayer subclasses vLLM builds (every subclass, at any depth, "
        "of vllm.model_executor.custom_op.PluggableLayer that vLLM's source uses as a value: "
        "PluggableLayer.__new__ looks up the __name__ of the class being built); op_names: "
        "class -> layer name (own or inherited @PluggableLayer.register name); modules, "
        "duplicates, bases_only as for custom_op. The hw_agnostic copy of "
        "PluggableLayer is not counted",
        "PluggableLayer",
        ("op_names", "modules", "duplicates", "bases_only"),
    ),
    "attention_backend": Recipe(
        "AttentionBackendEnum members (vllm/v1/attention/backends/registry.py); mamba: "
        "MambaAttentionBackendEnum members; cpu_members: the members "
        "CpuPlatform.get_attn_backend_cls can return (any other selection is ignored on CPU); "
        "paths: their default class paths",
        ex.enum_members(ATTN, "AttentionBackendEnum"),
        {
            "mamba": ex.enum_members(ATTN, "MambaAttentionBackendEnum"),
            "cpu_members": ex.enum_refs(
                CPU_PLATFORM,
                "CpuPlatform.get_attn_backend_cls",
                ATTN,
                "AttentionBackendEnum",
            ),
            "paths": ex.enum_ref_values(
                CPU_PLATFORM,
                "CpuPlatform.get_attn_backend_cls",
                ATTN,
                "AttentionBackendEnum",
            ),
        },
    ),
    "quantization": Recipe(
        "QuantizationMethods Literal (vllm/model_executor/layers/quantization/__init__.py); "
        "deprecated: DEPRECATED_QUANTIZATION_METHODS (need --allow-deprecated-quantization)",
        ex.constant(QUANT, "QuantizationMethods"),
        {"deprecated": ex.optional(ex.constant(QUANT, "DEPRECATED_QUANTIZATION_METHODS"))},
    ),
    "model_loader": Recipe(
        "load formats in _LOAD_FORMAT_TO_MODEL_LOADER "
        "(vllm/model_executor/model_loader/__init__.py)",
        ex.constant(
            "vllm/model_executor/model_loader/__init__.py",
            "_LOAD_FORMAT_TO_MODEL_LOADER",
        ),
    ),
    "kv_connector": Recipe(
        "names passed to KVConnectorFactory.register_connector in kv_connector/factory.py",
        ex.calls(
            "vllm/distributed/kv_transfer/kv_connector/factory.py",
            "KVConnectorFactory.register_connector",
        ),
    ),
    "ec_connector": Recipe(
        "names passed to ECConnectorFactory.register_connector in ec_connector/factory.py",
        ex.calls(
            "vllm/distributed/ec_transfer/ec_connector/factory.py",
            "ECConnectorFactory.register_connector",
        ),
    ),
    "kv_offload_spec": Recipe(
        "names passed to OffloadingSpecFactory.register_spec in vllm/v1/kv_offload/factory.py",
        ex.calls("vllm/v1/kv_offload/factory.py", "OffloadingSpecFactory.register_spec"),
    ),
    "tool_parser": Recipe(
        "tool parser names in _TOOL_PARSERS_TO_REGISTER (vllm/tool_parsers/__init__.py)",
        ex.constant("vllm/tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
    ),
    "reasoning_parser": Recipe(
        "reasoning parser names in _REASONING_PARSERS_TO_REGISTER (vllm/reasoning/__init__.py)",
        ex.constant("vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER"),
    ),
    "lora_resolver": Recipe(
        "resolver names vLLM's own plugins pass to LoRAResolverRegistry.register_resolver "
        "(vllm/plugins/lora_resolvers/); entry_points: vLLM's own vllm.general_plugins names",
        ex.calls("vllm/plugins/lora_resolvers/*.py", "LoRAResolverRegistry.register_resolver"),
        {"entry_points": ex.entry_point_names("vllm.general_plugins")},
    ),
    "sleep_mode_backend": Recipe(
        "names passed to SleepModeBackendFactory.register_backend "
        "(vllm/device_allocator/sleep_mode_backend.py)",
        ex.calls(
            "vllm/device_allocator/sleep_mode_backend.py",
            "SleepModeBackendFactory.register_backend",
        ),
    ),
    "kv_cache_dtype": Recipe(
        "CacheDType Literal (vllm/config/cache.py); reserved: other STR_DTYPE_TO_TORCH_DTYPE keys "
        "(vllm/utils/torch_utils.py) that a registration would silently overwrite; only targets "
        "that have register_kv_cache_dtype",
        ex.constant(CACHE, "CacheDType"),
        {
            "reserved": ex.extra_keys(
                "vllm/utils/torch_utils.py",
                "STR_DTYPE_TO_TORCH_DTYPE",
                ex.constant(CACHE, "CacheDType"),
            )
        },
        present=ex.has_symbol(CACHE, "register_kv_cache_dtype"),
    ),
    "platform": Recipe(
        "built-in platform detector names in builtin_platform_plugins (vllm/platforms/__init__.py)",
        ex.constant("vllm/platforms/__init__.py", "builtin_platform_plugins"),
    ),
    "stat_logger": Recipe(
        "none: vLLM publishes no vllm.stat_logger_plugins entry points", ex.nothing()
    ),
    "endpoint": Recipe(
        "none in vllm.endpoint_plugins; routes: every HTTP path vLLM's own servers register under "
        "vllm/entrypoints (a plugin route on the same path and method replaces vLLM's); methods: "
        "path -> HTTP methods",
        ex.nothing(),
        {
            "routes": ex.routes("vllm/entrypoints/"),
            "methods": ex.route_methods("vllm/entrypoints/"),
        },
    ),
    "io_processor": Recipe(
        "none: vLLM publishes no vllm.io_processor_plugins entry points", ex.nothing()
    ),
    "logits_processor": Recipe(
        "class names in BUILTIN_LOGITS_PROCESSORS (vllm/v1/sample/logits_processor/__init__.py): "
        "the V1 runner's always-on processors; none from vLLM 0.34, which has no V1 runner "
        "(Model Runner V2 builds its own by class, by no name); no entry points in "
        "vllm.logits_processors",
        lambda wheel: (
            ex.constant(V1_LOGITSPROCS, "BUILTIN_LOGITS_PROCESSORS")(wheel)
            if wheel.has(V1_LOGITSPROCS)
            else []
        ),
    ),
    "scheduler": Recipe(
        "none; default: the classes SchedulerConfig.get_scheduler_cls returns when "
        "scheduler_cls is unset",
        ex.nothing(),
        {
            "default": ex.function_imports(
                "vllm/config/scheduler.py", "SchedulerConfig.get_scheduler_cls"
            )
        },
    ),
    "worker_extension": Recipe(
        "none; worker_attributes: public class attributes of CPUWorker and GPU Worker and their "
        "vLLM bases (an extension attribute with one of these names fails init_worker's assert; "
        "single-underscore names collide too but are not listed)",
        ex.nothing(),
        {
            "worker_attributes": ex.class_attributes(
                ("vllm/v1/worker/cpu_worker.py", "CPUWorker"),
                ("vllm/v1/worker/gpu_worker.py", "Worker"),
            )
        },
    ),
    "model_class_override": Recipe(
        "none: overrides name built-in architectures, which the model kind lists",
        ex.nothing(),
    ),
}


# -- wheels and targets ------------------------------------------------------------------------


def open_target(catalog: Catalog, target: str) -> Wheel:
    spec = catalog.targets.get(target, {}).get("wheel")
    if not spec:
        raise FactsError(f"target {target!r} has no wheel in {catalog.root / 'vllm.yml'}")
    return load_wheel(wheel_for_spec(str(spec)))


def open_ref(catalog: Catalog, ref: str) -> tuple[str, Wheel, str | None]:
    """A `diff` argument: a target id from vllm.yml or a path to a wheel file."""
    if ref in catalog.targets:
        return ref, open_target(catalog, ref), ref
    path = Path(ref)
    if path.is_file():
        wheel = load_wheel(path)
        return wheel.version, wheel, None
    raise FactsError(
        f"{ref!r} is neither a target in vllm.yml ({', '.join(catalog.targets)}) nor a wheel file"
    )


def extract_kind(recipe: Recipe, wheel: Wheel) -> dict[str, Any] | None:
    """One kind's per-target object, or None when the kind does not exist in this wheel."""
    if recipe.present is not None and not recipe.present(wheel):
        return None
    out: dict[str, Any] = {"names": recipe.names(wheel)}
    for key, values in recipe.extras.items():
        value = values(wheel)
        if value is not None:
            out[key] = value
    return out


def extract_all(wheel: Wheel, kinds: Sequence[str]) -> dict[str, dict[str, Any] | None]:
    """Every kind's per-target object; a recipe that no longer matches the wheel is an error."""
    results, errors = extract_each(wheel, kinds)
    if errors:
        raise FactsError("\n".join(errors.values()))
    return results


def extract_each(
    wheel: Wheel, kinds: Sequence[str]
) -> tuple[dict[str, dict[str, Any] | None], dict[str, str]]:
    """Like extract_all, but a broken recipe becomes an error line for its kind and the
    others go on (check and diff report every kind, also for a new release)."""
    results: dict[str, dict[str, Any] | None] = {}
    errors: dict[str, str] = {}
    for kind in kinds:
        try:
            results[kind] = extract_kind(RECIPES[kind], wheel)
        except FactsError as exc:
            errors[kind] = f"kind {kind}: recipe no longer matches {wheel.label}: {exc}"
    return results, errors


def dump(doc: dict[str, Any]) -> str:
    # Byte-identical reruns: sorted keys, fixed indent, trailing newline.
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


# -- extract -----------------------------------------------------------------------------------


def cmd_extract(catalog: Catalog, targets: list[str]) -> int:
    fresh = {t: extract_all(open_target(catalog, t), list(RECIPES)) for t in targets}
    for kind, recipe in RECIPES.items():
        path = catalog.root / kind / "builtins.json"
        per_target: dict[str, Any] = {}
        if set(targets) != set(catalog.targets) and path.is_file():
            # A partial run keeps the other targets' entries as they are.
            per_target = {
                t: v
                for t, v in json.loads(path.read_text())["targets"].items()
                if t in catalog.targets
            }
        for t in targets:
            per_target.pop(t, None)
            if fresh[t][kind] is not None:
                per_target[t] = fresh[t][kind]
        doc = {"generated_by": GENERATED_BY, "what": recipe.what, "targets": per_target}
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != dump(doc):
            path.write_text(dump(doc))
            print(f"wrote {path}")
    for t in targets if "patch" in catalog.kinds else []:
        for path in write_patch_targets(catalog, t, open_target(catalog, t)):
            print(f"wrote {path}")
    print(f"extracted {len(RECIPES)} kinds and the patch targets for {', '.join(targets)}")
    return 0


# -- check -------------------------------------------------------------------------------------


def check_builtins(
    catalog: Catalog, kind: str, target: str, fresh: dict[str, Any] | None, wheel: Wheel
) -> list[str]:
    """builtins.json's entry for `target` against a fresh extraction from `wheel`."""
    path = catalog.root / kind / "builtins.json"
    head = f"kind {kind}: builtins.json"
    if not path.is_file():
        return [f"{head}: missing (run {GENERATED_BY})"]
    doc = json.loads(path.read_text())
    stored = doc.get("targets", {}).get(target)
    problems = []
    if doc.get("what") != RECIPES[kind].what or doc.get("generated_by") != GENERATED_BY:
        problems.append(f"{head}: header differs from the recipe (run {GENERATED_BY})")
    if stored is None and fresh is None:
        return problems
    if stored is None or fresh is None:
        where = "has no entry" if stored is None else "has an entry"
        what = "has the kind" if fresh is not None else "does not have the kind"
        return [*problems, f"{head}: {where} for target {target}, {wheel.label} {what}"]
    return problems + [
        f"{head} {line}" for line in compare_objects(stored, fresh, "builtins.json", wheel.label)
    ]


def check_kind_yml(
    kind: str, spec: dict[str, Any], target: str, wheel: Wheel
) -> tuple[list[str], int, int]:
    """Problems with one kind.yml's facts and api names, and how many of each were checked."""
    problems = []
    if "builtins" in spec:
        # One place per recipe: RECIPES. catalog.jinja replaces the key with builtins.json.
        problems.append(f"kind {kind}: kind.yml has a builtins: block; {RECIPE_HOME}")
    if not applies(spec, target):
        return problems, 0, 0
    facts = [f for f in spec.get("facts") or [] if isinstance(f, dict) and applies(f, target)]
    api = {
        k: e
        for k, e in (spec.get("api") or {}).items()
        if isinstance(e, dict) and applies(e, target)
    }
    malformed = [f for f in spec.get("facts") or [] if not isinstance(f, dict)]
    malformed += [k for k, e in (spec.get("api") or {}).items() if not isinstance(e, dict)]
    problems += [f"kind {kind}: kind.yml entry {m!r} is not a mapping" for m in malformed]
    for fact in facts:
        problems += check_fact(kind, fact, wheel)
    for key, entry in api.items():
        problems += check_api(kind, key, entry, target, wheel)
    return problems, len(facts), len(api)


def check_pins(catalog: Catalog, target: str, wheel: Wheel) -> list[str]:
    """vllm.yml's hand-typed facts of a target against the wheel's METADATA: the distribution
    and version (`wheel`, `version`), the Python the generated plugin declares (`python`: the
    wheel's Requires-Python lower bound) and the `vllm` extra's range (`requirement`: the
    target's minor)."""
    spec = catalog.vllm["targets"][target]
    meta = dict(line.split(": ", 1) for line in wheel.metadata().splitlines() if ": " in line[:40])
    problems = []
    name, _, version = str(spec.get("wheel", "")).partition("==")
    if (name, version) != (meta.get("Name"), meta.get("Version")):
        problems.append(
            f"vllm.yml targets.{target}.wheel: {spec.get('wheel')}, but the wheel is"
            f" {meta.get('Name')}=={meta.get('Version')}"
        )
    if str(spec.get("version")) != str(meta.get("Version", "")).split("+")[0]:
        problems.append(
            f"vllm.yml targets.{target}.version: {spec.get('version')}, but the wheel is"
            f" {meta.get('Version')}"
        )
    floor = re.search(r">=\s*([0-9.]+)", meta.get("Requires-Python", ""))
    if floor is None or spec.get("python") != f">={floor.group(1)}":
        problems.append(
            f"vllm.yml targets.{target}.python: {spec.get('python')!r}, but the wheel requires"
            f" Python {meta.get('Requires-Python')!r} (write its lower bound, >=X.Y)"
        )
    major, minor = str(spec.get("version")).split(".")[:2]
    wanted = f"vllm>={major}.{minor},<{major}.{int(minor) + 1}"
    if spec.get("requirement") != wanted:
        problems.append(
            f"vllm.yml targets.{target}.requirement: {spec.get('requirement')!r}, but the"
            f" target's minor is {major}.{minor} ({wanted!r})"
        )
    return problems


def check_target(catalog: Catalog, target: str, wheel: Wheel) -> tuple[list[tuple[str, str]], str]:
    """All problems for one target (as (kind, line)), and a one-line summary."""
    problems: list[tuple[str, str]] = [
        ("general", line) for line in check_pins(catalog, target, wheel)
    ]
    n_facts = n_api = 0
    for kind, spec in catalog.kinds.items():
        lines, facts, api = check_kind_yml(kind, spec, target, wheel)
        problems += [(kind, line) for line in lines]
        n_facts, n_api = n_facts + facts, n_api + api
    listed_by = [k for k, spec in catalog.kinds.items() if target in (spec.get("targets") or [])]
    if not listed_by or not n_facts:
        # An OK that checked nothing would say the target is supported when no kind is.
        problems.append(
            (
                "general",
                f"target {target}: {len(listed_by)} kinds list it, {n_facts} facts checked:"
                " set `since:` (or `until:`) in the kind.yml of each kind that exists there",
            )
        )
    # builtins.json: in every kind folder, and for every kind vllm.yml lists.
    listed = catalog.vllm.get("kinds") or []
    kinds = sorted(k for k in RECIPES if k in catalog.folders or k in listed)
    fresh, errors = extract_each(wheel, kinds)
    problems += [(kind, line) for kind, line in errors.items()]
    for kind in fresh:
        lines = check_builtins(catalog, kind, target, fresh[kind], wheel)
        problems += [(kind, line) for line in lines]
    if "patch" in catalog.kinds:
        problems += [("patch", line) for line in check_patch_targets(catalog, target, wheel)]
    for folder in catalog.folders:
        if folder not in RECIPES and (catalog.root / folder / "builtins.json").is_file():
            problems.append((folder, f"kind {folder}: builtins.json has no recipe; {RECIPE_HOME}"))
    summary = (
        f"{target}: {wheel.distribution} {wheel.version} ({wheel.path.name}): "
        f"{n_facts} facts, {n_api} api names, {len(kinds)} builtins.json checked"
    )
    return problems, summary


def cmd_check(
    catalog: Catalog, targets: list[str], wheel_path: str | None, as_target: str | None
) -> int:
    runs: list[tuple[str, Wheel]]
    if wheel_path:
        target = as_target or str(catalog.vllm.get("latest"))
        if not Path(wheel_path).is_file():
            raise FactsError(f"no wheel file {wheel_path}")
        runs = [(target, load_wheel(Path(wheel_path)))]
    else:
        runs = [(t, open_target(catalog, t)) for t in targets]
    all_problems: list[tuple[str, str]] = []
    summaries = []
    for target, wheel in runs:
        problems, summary = check_target(catalog, target, wheel)
        all_problems += [(k, f"{line} [target {target}]") for k, line in problems]
        summaries.append(summary + (f": {len(problems)} problems" if problems else ": OK"))
    for _, line in sorted(all_problems, key=lambda p: catalog.order(p[0])):
        print(line)
    if any("builtins.json" in line for _, line in all_problems):
        print(f"builtins.json is generated: update the kind folders, then run {GENERATED_BY}")
    for summary in summaries:
        print(summary)
    return 1 if all_problems else 0


# -- diff --------------------------------------------------------------------------------------


def diff_builtins(
    kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, a: str, b: str
) -> list[str]:
    if old is None and new is None:
        return []
    if old is None or new is None:
        absent, present = (a, b) if old is None else (b, a)
        return [f"kind {kind}: absent in {absent}, present in {present}"]
    return [f"kind {kind}: {line}" for line in compare_objects(old, new, a, b)]


def _describe_symbol(wheel: Wheel, path: str, symbol: str) -> dict[str, Any] | None:
    node = pyread.find_symbol(wheel.tree(path), symbol) if wheel.has(path) else None
    return describe(wheel, path, node) if node is not None else None


def diff_catalog(
    catalog: Catalog,
    old: tuple[str, Wheel, str | None],
    new: tuple[str, Wheel, str | None],
) -> list[tuple[str, str]]:
    """Facts and api names of every kind.yml whose definition differs between two wheels."""
    (a, wa, ta), (b, wb, tb) = old, new
    lines: list[tuple[str, str]] = []

    def compare(kind: str, head: str, da: dict[str, Any] | None, db: dict[str, Any] | None) -> None:
        if da is None and db is None:
            return
        if da is None or db is None:
            missing, present = (a, b) if da is None else (b, a)
            lines.append((kind, f"{head}: missing in {missing}, present in {present}"))
            return
        lines.extend((kind, f"{head}: {line}") for line in compare_descriptions(da, db, a, b))

    for kind, spec in catalog.kinds.items():
        for fact in spec.get("facts") or []:
            path, symbol = str(fact.get("path")), str(fact.get("symbol"))
            compare(
                kind,
                f"kind {kind}: fact {symbol} ({path})",
                _describe_symbol(wa, path, symbol),
                _describe_symbol(wb, path, symbol),
            )
        for key, entry in (spec.get("api") or {}).items():
            ma, na = api_entry(entry, ta)
            mb, nb = api_entry(entry, tb)
            fa, fb = resolve_api(wa, ma, na), resolve_api(wb, mb, nb)
            da = describe(wa, *fa) if fa else None
            db = describe(wb, *fb) if fb else None
            compare(kind, f"kind {kind}: api {key} ({mb}.{nb})", da, db)
    return lines


def cmd_diff(catalog: Catalog, ref_a: str, ref_b: str) -> int:
    old, new = open_ref(catalog, ref_a), open_ref(catalog, ref_b)
    (a, wa, _), (b, wb, _) = old, new
    print(
        f"vLLM drift {a} ({wa.distribution} {wa.version}) -> {b} ({wb.distribution} {wb.version})"
    )
    (fa, ea), (fb, eb) = extract_each(wa, list(RECIPES)), extract_each(wb, list(RECIPES))
    lines: list[tuple[str, str]] = [(k, line) for k, line in [*ea.items(), *eb.items()]]
    for kind in RECIPES:
        if kind in fa and kind in fb:
            lines += [(kind, line) for line in diff_builtins(kind, fa[kind], fb[kind], a, b)]
    lines += diff_catalog(catalog, old, new)
    # Two facts about one symbol (say, its params and its abstract set) give the same lines.
    lines = list(dict.fromkeys(lines))
    for _, line in sorted(lines, key=lambda p: catalog.order(p[0])):
        print(line)
    changed = sorted({k for k, _ in lines}, key=catalog.order)
    print(f"{len(changed)} kinds changed: {', '.join(changed)}" if changed else "no drift")
    return 0


# -- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--catalog",
        type=Path,
        default=DEFAULT_CATALOG,
        help="the extensions/ folder (default: this repo's)",
    )
    parser = argparse.ArgumentParser(
        prog="python -m tools.vllm_facts", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("extract", parents=[common], help="write extensions/<kind>/builtins.json")
    p.add_argument(
        "--target",
        action="append",
        help="a target in vllm.yml (repeatable; default: all)",
    )
    p = sub.add_parser("check", parents=[common], help="check kind.yml facts/api and builtins.json")
    p.add_argument(
        "--target",
        action="append",
        help="a target in vllm.yml (repeatable; default: all)",
    )
    p.add_argument("--wheel", help="check this wheel file instead of the targets' wheels")
    p.add_argument(
        "--as",
        dest="as_target",
        help="the target the --wheel stands for (default: latest)",
    )
    p = sub.add_parser("diff", parents=[common], help="drift between two targets or wheel files")
    p.add_argument("old", metavar="FROM")
    p.add_argument("new", metavar="TO")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        catalog = load_catalog(args.catalog)
        targets = (
            [str(t) for t in args.target]
            if getattr(args, "target", None)
            else list(catalog.targets)
        )
        unknown = [t for t in targets if t not in catalog.targets]
        if unknown:
            raise FactsError(
                f"unknown target(s) {', '.join(unknown)}; vllm.yml has {', '.join(catalog.targets)}"
            )
        if args.command == "extract":
            return cmd_extract(catalog, targets)
        if args.command == "check":
            return cmd_check(catalog, targets, args.wheel, args.as_target)
        return cmd_diff(catalog, args.old, args.new)
    except FactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
