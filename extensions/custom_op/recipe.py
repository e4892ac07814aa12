"""Where the custom_op kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools.recipes import built_classes

RECIPE = built_classes(
    "class names of the CustomOp subclasses vLLM builds (every subclass, at any depth, of "
    "vllm.model_executor.custom_op.CustomOp that vLLM's source uses as a value: "
    "CustomOp.__new__ looks up the __name__ of the class being built, so these are the "
    "register_oot keys that take effect); op_names: class -> op name (its own or inherited "
    "@CustomOp.register name); modules: class -> defining module; duplicates: a class name "
    "defined in several modules; bases_only: classes vLLM only subclasses -> the built "
    "subclasses below them; own_forward: class -> the class of its chain defining forward "
    "(so CustomOp's dispatch to forward_native/forward_cpu may not run). The separate "
    "CustomOp copy in vllm/model_executor/hw_agnostic/ is another registry, not counted",
    "CustomOp",
    ("op_names", "modules", "duplicates", "bases_only", "own_forward"),
)
