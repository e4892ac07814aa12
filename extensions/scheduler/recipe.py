"""Where the scheduler kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "none; default: the classes SchedulerConfig.get_scheduler_cls returns when "
    "scheduler_cls is unset",
    ex.nothing(),
    {
        "default": ex.function_imports(
            "vllm/config/scheduler.py", "SchedulerConfig.get_scheduler_cls"
        )
    },
)
