"""Where the lora_resolver kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "resolver names vLLM's own plugins pass to LoRAResolverRegistry.register_resolver "
    "(vllm/plugins/lora_resolvers/); entry_points: vLLM's own vllm.general_plugins names",
    ex.calls("vllm/plugins/lora_resolvers/*.py", "LoRAResolverRegistry.register_resolver"),
    {"entry_points": ex.entry_point_names("vllm.general_plugins")},
)
