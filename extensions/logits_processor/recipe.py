"""Where the logits_processor kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

V1_LOGITSPROCS = "vllm/v1/sample/logits_processor/__init__.py"  # up to vLLM 0.33

RECIPE = Recipe(
    "class names in BUILTIN_LOGITS_PROCESSORS (vllm/v1/sample/logits_processor/__init__.py): "
    "the V1 runner's always-on processors; none from vLLM 0.34, which has no V1 runner "
    "(Model Runner V2 builds its own by class, by no name); no entry points in "
    "vllm.logits_processors",
    lambda wheel: (
        ex.constant(V1_LOGITSPROCS, "BUILTIN_LOGITS_PROCESSORS")(wheel)
        if wheel.has(V1_LOGITSPROCS)
        else []
    ),
)
