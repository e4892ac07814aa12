"""Where the kv_cache_dtype kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

CACHE = "vllm/config/cache.py"

RECIPE = Recipe(
    "CacheDType Literal (vllm/config/cache.py); reserved: other STR_DTYPE_TO_TORCH_DTYPE keys "
    "(vllm/utils/torch_utils.py) that a registration would silently overwrite; only targets "
    "that have register_kv_cache_dtype",
    ex.constant(CACHE, "CacheDType"),
    {
        "reserved": ex.extra_keys(
            "vllm/utils/torch_utils.py",
            "STR_DTYPE_TO_TORCH_DTYPE",
            ex.constant(CACHE, "CacheDType"),
        )
    },
    present=ex.has_symbol(CACHE, "register_kv_cache_dtype"),
)
