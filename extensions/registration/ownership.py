"""What an author writes in place of the registration kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). The default instance (a range from before 0.34) registers a quantization config by the
decorator of vLLM's registry, which takes a QuantizationConfig subclass."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "registration": (
        "a quantization config that names its method",
        """from vllm.model_executor.layers.quantization.base_config import QuantizationConfig


class $cls(QuantizationConfig):
    @classmethod
    def get_name(cls) -> str:
        return "$name"
""",
    ),
}
