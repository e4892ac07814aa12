"""What an author writes in place of the kv_offload_spec kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "kv_offload_spec": (
        "vLLM's CPU offloading spec as it is",
        """from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec


class $cls(CPUOffloadingSpec):
    pass
""",
    ),
}
