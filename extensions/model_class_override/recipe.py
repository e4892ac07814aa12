"""Where the model_class_override kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "none: overrides name built-in architectures, which the model kind lists",
    ex.nothing(),
)
