"""What an author writes in place of the patch kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "patch": (
        "a patch that counts the calls",
        """from collections.abc import Callable
from typing import Any

CALLS = [0]


def replacement(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    CALLS[0] += 1
    return original(*args, **kwargs)
""",
    ),
}
