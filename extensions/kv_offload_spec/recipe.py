"""Where the kv_offload_spec kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "names passed to OffloadingSpecFactory.register_spec in vllm/v1/kv_offload/factory.py",
    ex.calls("vllm/v1/kv_offload/factory.py", "OffloadingSpecFactory.register_spec"),
)
