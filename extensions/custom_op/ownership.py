"""What an author writes in place of the custom_op kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "custom_op": (
        "RMSNorm computed by hand in float32",
        """from typing import Any

import torch
from vllm.model_executor.layers.layernorm import RMSNorm


class $cls(RMSNorm):
    def forward_native(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
        if residual is not None:
            x = x + residual
            residual = x
        variance = x.float().pow(2).mean(dim=-1, keepdim=True)
        out = (x.float() * torch.rsqrt(variance + self.variance_epsilon)).to(x.dtype)
        out = out * self.weight
        return out if residual is None else (out, residual)

    def forward_cpu(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_native(*args, **kwargs)
""",
    ),
}
