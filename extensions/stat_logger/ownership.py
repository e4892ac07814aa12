"""What an author writes in place of the stat_logger kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "stat_logger": (
        "a logger that counts iterations and logs nothing",
        """from typing import Any

from vllm.config import VllmConfig
from vllm.v1.metrics.loggers import StatLoggerBase


class $cls(StatLoggerBase):
    def __init__(self, vllm_config: VllmConfig, engine_index: int = 0) -> None:
        self.engine_index = engine_index
        self.iterations = 0

    def record(self, scheduler_stats: Any, iteration_stats: Any, *args: Any, **kw: Any) -> None:
        if iteration_stats is not None:
            self.iterations += 1

    def log_engine_initialized(self) -> None:
        pass
""",
    ),
}
