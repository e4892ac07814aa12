"""Where the model kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

MODELS = "vllm/model_executor/models/registry.py"
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
POOLING = ex.module_class_maps(MODELS, POOLING_TABLES, "vllm.model_executor.models")
MULTIMODAL = ex.module_class_map(MODELS, "_MULTIMODAL_MODELS", "vllm.model_executor.models")
DRAFT = ex.module_class_map(MODELS, "_SPECULATIVE_DECODING_MODELS", "vllm.model_executor.models")

RECIPE = Recipe(
    "architectures in _VLLM_MODELS (vllm/model_executor/models/registry.py); text_generation: "
    "_TEXT_GENERATION_MODELS as arch -> module:Class; oot_supported: _OOT_SUPPORTED_MODELS; "
    "model_types: the config.json model types vLLM's _CONFIG_REGISTRY "
    "(vllm/transformers_utils/config.py) or transformers' CONFIG_MAPPING_NAMES know, at the "
    "lowest transformers the wheel requires; base_configs: arch of any family -> the "
    "transformers configuration class of the model type whose transformers model class has "
    "that name (modeling_auto's MODEL_*_MAPPING_NAMES, causal LM first), or, for an EAGLE "
    "draft vLLM names Eagle/Eagle3/DFlash + ARCH, ARCH's; config_registry: the model types of _CONFIG_REGISTRY alone (vLLM reads "
    "them before asking transformers); pooling, multimodal, draft: arch -> module:Class of "
    "the pooling tables (embedding, late interaction, reward, token and sequence "
    "classification), _MULTIMODAL_MODELS and _SPECULATIVE_DECODING_MODELS",
    ex.constant(MODELS, "_VLLM_MODELS"),
    {
        "text_generation": TEXT_GENERATION,
        "oot_supported": ex.optional(ex.constant(MODELS, "_OOT_SUPPORTED_MODELS")),
        "model_types": ex.model_types(),
        "config_registry": ex.config_registry(),
        "pooling": POOLING,
        "multimodal": MULTIMODAL,
        "draft": DRAFT,
        "base_configs": ex.base_configs(TEXT_GENERATION, POOLING, MULTIMODAL, DRAFT),
    },
)
