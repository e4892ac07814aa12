"""Where the quantization kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

QUANT = "vllm/model_executor/layers/quantization/__init__.py"

RECIPE = Recipe(
    "QuantizationMethods Literal (vllm/model_executor/layers/quantization/__init__.py); "
    "deprecated: DEPRECATED_QUANTIZATION_METHODS (need --allow-deprecated-quantization)",
    ex.constant(QUANT, "QuantizationMethods"),
    {"deprecated": ex.optional(ex.constant(QUANT, "DEPRECATED_QUANTIZATION_METHODS"))},
)
