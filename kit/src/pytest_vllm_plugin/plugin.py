"""The pytest plugin (entry point `vllm_plugin` in group `pytest11`): loaded by pytest in every
project that has this distribution installed."""

from __future__ import annotations
