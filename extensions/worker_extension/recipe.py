"""Where the worker_extension kind's built-in names live in vLLM's source: its builtins.json,
written and checked by `python -m tools.vllm_facts extract|check|diff`."""

from __future__ import annotations

from tools import extractors as ex
from tools.recipes import Recipe

RECIPE = Recipe(
    "none; worker_attributes: public class attributes of CPUWorker and GPU Worker and their "
    "vLLM bases (an extension attribute with one of these names fails init_worker's assert; "
    "single-underscore names collide too but are not listed)",
    ex.nothing(),
    {
        "worker_attributes": ex.class_attributes(
            ("vllm/v1/worker/cpu_worker.py", "CPUWorker"),
            ("vllm/v1/worker/gpu_worker.py", "Worker"),
        )
    },
)
