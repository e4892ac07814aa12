"""Where the sleep_mode_backend kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "names passed to SleepModeBackendFactory.register_backend "
    "(vllm/device_allocator/sleep_mode_backend.py)",
    ex.calls(
        "vllm/device_allocator/sleep_mode_backend.py",
        "SleepModeBackendFactory.register_backend",
    ),
)
