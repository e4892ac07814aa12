"""What an author writes in place of the model_class_override kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "model_class_override": (
        "vLLM's Llama with its logits computed through the parent",
        """from typing import Any

from vllm.model_executor.models.llama import LlamaForCausalLM


class $cls(LlamaForCausalLM):
    def compute_logits(self, *args: Any, **kwargs: Any) -> Any:
        return super().compute_logits(*args, **kwargs)
""",
    ),
}
