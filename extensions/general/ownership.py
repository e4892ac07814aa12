"""What an author writes in place of the general kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "general": (
        "a hook that records the processes it ran in",
        """import os

RAN_IN: list[int] = []


def setup() -> None:
    if os.getpid() not in RAN_IN:
        RAN_IN.append(os.getpid())
""",
    ),
}
