"""What an author writes in place of the lora_resolver kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "lora_resolver": (
        "adapters listed in a JSON variable, name to folder",
        """import json
import os

from vllm.lora.request import LoRARequest
from vllm.lora.resolver import LoRAResolver


class $cls(LoRAResolver):
    async def resolve_lora(self, base_model_name: str, lora_name: str) -> LoRARequest | None:
        known = json.loads(os.environ.get("${PKG}_ADAPTERS", "{}"))
        if lora_name not in known:
            return None
        return LoRARequest(lora_name, len(known) + sorted(known).index(lora_name), known[lora_name])
""",
    ),
}
