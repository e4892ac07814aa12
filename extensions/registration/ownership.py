"""What an author writes in place of the registration kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). The default instance registers a custom speculative method in vLLM 0.34 (the registry
takes a SpeculatorConfig subclass naming its speculator) and, in a plugin whose range starts
before 0.34, a quantization config in decorator form (a QuantizationConfig subclass)."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "registration": (
        "a class of the author's, kept as its registry requires",
        """try:  # vLLM 0.34: a custom speculative method that keeps the token history dense
    from vllm.v1.worker.gpu.spec_decode.ngram.config import NgramSpeculatorConfig as Base
except ImportError:  # before 0.34: a quantization config
    from vllm.model_executor.layers.quantization.base_config import (  # type: ignore[assignment]
        QuantizationConfig as Base,
    )


class $cls(Base):  # type: ignore[misc,valid-type]
    prefer_dense_token_history = True
""",
    ),
}
