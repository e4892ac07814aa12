"""Where the pluggable_layer kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools.recipes import built_classes

RECIPE = built_classes(
    "class names of the PluggableLayer subclasses vLLM builds (every subclass, at any depth, "
    "of vllm.model_executor.custom_op.PluggableLayer that vLLM's source uses as a value: "
    "PluggableLayer.__new__ looks up the __name__ of the class being built); op_names: "
    "class -> layer name (own or inherited @PluggableLayer.register name); modules, "
    "duplicates, bases_only as for custom_op. The hw_agnostic copy of "
    "PluggableLayer is not counted",
    "PluggableLayer",
    ("op_names", "modules", "duplicates", "bases_only"),
)
