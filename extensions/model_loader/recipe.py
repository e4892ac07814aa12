"""Where the model_loader kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "load formats in _LOAD_FORMAT_TO_MODEL_LOADER (vllm/model_executor/model_loader/__init__.py)",
    ex.constant(
        "vllm/model_executor/model_loader/__init__.py",
        "_LOAD_FORMAT_TO_MODEL_LOADER",
    ),
)
