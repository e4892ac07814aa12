"""What an author writes in place of the model kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "model": (
        "a Qwen2-shaped model (a tiny Llama cannot serve it)",
        """from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM


class $cls(Qwen2ForCausalLM):
    pass
""",
    ),
}
