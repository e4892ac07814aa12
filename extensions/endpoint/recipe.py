"""Where the endpoint kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "none in vllm.endpoint_plugins; routes: every HTTP path vLLM's own servers register under "
    "vllm/entrypoints (a plugin route on the same path and method replaces vLLM's); methods: "
    "path -> HTTP methods",
    ex.nothing(),
    {
        "routes": ex.routes("vllm/entrypoints/"),
        "methods": ex.route_methods("vllm/entrypoints/"),
    },
)
