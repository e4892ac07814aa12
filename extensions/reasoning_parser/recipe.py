"""Where the reasoning_parser kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "reasoning parser names in _REASONING_PARSERS_TO_REGISTER (vllm/reasoning/__init__.py)",
    ex.constant("vllm/reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER"),
)
