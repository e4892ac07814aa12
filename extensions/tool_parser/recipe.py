"""Where the tool_parser kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "tool parser names in _TOOL_PARSERS_TO_REGISTER (vllm/tool_parsers/__init__.py)",
    ex.constant("vllm/tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
)
