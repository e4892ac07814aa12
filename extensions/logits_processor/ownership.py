"""What an author writes in place of the logits_processor kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "logits_processor": (
        "a pass-through processor, without validate_params",
        """from typing import Any

import torch
from vllm.v1.sample.logits_processor import LogitsProcessor


class $cls(LogitsProcessor):
    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.steps = 0

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: Any) -> None:
        self.steps += 1

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits
""",
    ),
    "logits_processor/v2": (
        "a pass-through processor, without validate_params",
        """from typing import Any

import torch
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor


class $cls(LogitsProcessor):
    def __init__(self, vllm_config: Any, req_states: Any) -> None:
        self.steps = 0

    def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        self.steps += 1
        return logits
""",
    ),
}
