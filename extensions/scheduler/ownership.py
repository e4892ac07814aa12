"""What an author writes in place of the scheduler kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "scheduler": (
        "a scheduler that counts its steps",
        """from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler


class $cls(Scheduler):
    steps = 0

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        type(self).steps += 1
        return super().schedule(*args, **kwargs)
""",
    ),
}
