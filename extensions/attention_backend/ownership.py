"""What an author writes in place of the attention_backend kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "attention_backend": (
        "vLLM's CPU backend as it is",
        """from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend


class $cls(CPUAttentionBackend):
    pass
""",
    ),
}
