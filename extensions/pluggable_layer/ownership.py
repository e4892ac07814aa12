"""What an author writes in place of the pluggable_layer kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "pluggable_layer": (
        "a layer that counts its calls",
        """from typing import Any

from vllm.model_executor.layers.linear import RowParallelLinear


class $cls(RowParallelLinear):
    calls = 0

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        type(self).calls += 1
        return super().forward(*args, **kwargs)
""",
    ),
}
