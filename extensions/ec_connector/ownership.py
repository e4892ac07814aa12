"""What an author writes in place of the ec_connector kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "ec_connector": (
        "vLLM's example connector as it is",
        """from vllm.distributed.ec_transfer.ec_connector.example_connector import (
    ECExampleConnector,
)


class $cls(ECExampleConnector):
    pass
""",
    ),
}
