"""What an author writes in place of the sleep_mode_backend kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "sleep_mode_backend": (
        "vLLM's CuMem backend as it is",
        """from vllm.device_allocator.sleep_mode_backend import CuMemBackend


class $cls(CuMemBackend):
    pass
""",
    ),
}
