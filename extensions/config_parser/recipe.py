"""Where the config_parser kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "config formats in _CONFIG_FORMAT_TO_CONFIG_PARSER (vllm/transformers_utils/config.py)",
    ex.constant("vllm/transformers_utils/config.py", "_CONFIG_FORMAT_TO_CONFIG_PARSER"),
)
