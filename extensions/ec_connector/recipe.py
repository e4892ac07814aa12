"""Where the ec_connector kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "names passed to ECConnectorFactory.register_connector in ec_connector/factory.py",
    ex.calls(
        "vllm/distributed/ec_transfer/ec_connector/factory.py",
        "ECConnectorFactory.register_connector",
    ),
)
