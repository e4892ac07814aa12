"""What an author writes in place of the quantization kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "quantization": (
        "a method that reads its own config file from the checkpoint",
        """from typing import Any

import torch
from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
from vllm.model_executor.layers.quantization.base_config import (
    QuantizationConfig,
    QuantizeMethodBase,
)


class $cls(QuantizationConfig):
    def __init__(self, bits: int = 16) -> None:
        super().__init__()
        self.bits = bits

    def get_name(self) -> Any:
        return "$name"

    def get_supported_act_dtypes(self) -> list[torch.dtype]:
        return [torch.float32, torch.bfloat16, torch.float16]

    @classmethod
    def get_min_capability(cls) -> int:
        return 0

    @staticmethod
    def get_config_filenames() -> list[str]:
        return ["$name.json"]

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "$cls":
        return cls(bits=int(config.get("bits", 16)))

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> QuantizeMethodBase | None:
        return UnquantizedLinearMethod() if isinstance(layer, LinearBase) else None
""",
    ),
}
