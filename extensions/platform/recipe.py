"""Where the platform kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "built-in platform detector names in builtin_platform_plugins (vllm/platforms/__init__.py)",
    ex.constant("vllm/platforms/__init__.py", "builtin_platform_plugins"),
)
