"""Where the general kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "vLLM's own vllm.general_plugins entry-point names (the wheel's entry_points.txt)",
    ex.entry_point_names("vllm.general_plugins"),
)
