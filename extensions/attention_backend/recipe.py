"""Where the attention_backend kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

ATTN = "vllm/v1/attention/backends/registry.py"
CPU_PLATFORM = "vllm/platforms/cpu.py"

RECIPE = Recipe(
    "AttentionBackendEnum members (vllm/v1/attention/backends/registry.py); mamba: "
    "MambaAttentionBackendEnum members; cpu_members: the members "
    "CpuPlatform.get_attn_backend_cls can return (any other selection is ignored on CPU); "
    "paths: their default class paths",
    ex.enum_members(ATTN, "AttentionBackendEnum"),
    {
        "mamba": ex.enum_members(ATTN, "MambaAttentionBackendEnum"),
        "cpu_members": ex.enum_refs(
            CPU_PLATFORM,
            "CpuPlatform.get_attn_backend_cls",
            ATTN,
            "AttentionBackendEnum",
        ),
        "paths": ex.enum_ref_values(
            CPU_PLATFORM,
            "CpuPlatform.get_attn_backend_cls",
            ATTN,
            "AttentionBackendEnum",
        ),
    },
)
