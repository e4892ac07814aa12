"""What an author writes in place of the worker_extension kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "worker_extension": (
        "an extension with another method, report_pid",
        """import os
from typing import Any


class $cls:
    def report_pid(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "rank": getattr(self, "rank", None)}
""",
    ),
}
