"""What an author writes in place of the kv_cache_dtype kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "kv_cache_dtype": (
        "a float16 KV cache",
        """import torch
from vllm.v1.kv_cache_interface import KVQuantMode, get_kv_quant_mode


class $cls:
    name = "$name"

    def torch_dtype(self) -> torch.dtype:
        return torch.float16

    def quant_mode(self) -> KVQuantMode:
        return get_kv_quant_mode("float16")
""",
    ),
}
