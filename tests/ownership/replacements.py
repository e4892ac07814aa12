"""What an author writes in place of each kind's example (issue 20): a different but valid
implementation of vLLM's interface, as a real plugin has on day one, written in the kind's
extensions/<kind>/ownership.py and gathered here. Each is a
`string.Template` of the whole module: $pkg the package, $cls the instance's class (the name
the glue and the template-owned checks know), $name the instance's name in vLLM, $ep its entry
point, $P the package's class prefix.

None keeps the example's behaviour that the template's checks used to require: no
`general._configured`, no `validate_params`, no ping method, a quantization config that reads
a config file, a detector switched by another variable, a route with another reply, a parser
of another format, a connector that never loads, a model of another architecture.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

EXTENSIONS = Path(__file__).resolve().parents[2] / "extensions"

HEADER = '"""Replaced by the author: {what}."""\n\nfrom __future__ import annotations\n\n'


def _gather() -> dict[str, tuple[str, str]]:
    """{kind or kind/variant: (what, body)} from every kind's extensions/<kind>/ownership.py, in
    the order of extensions/vllm.yml `kinds`; a kind without one fails here, naming the file."""
    kinds = yaml.safe_load((EXTENSIONS / "vllm.yml").read_text()).get("kinds") or []
    modules: dict[str, tuple[str, str]] = {}
    for kind in kinds:
        if not (EXTENSIONS / kind / "kind.yml").is_file():
            continue
        path = EXTENSIONS / kind / "ownership.py"
        if not path.is_file():
            raise FileNotFoundError(f"kind {kind}: no {path} (what an author writes instead)")
        spec = importlib.util.spec_from_file_location(f"extensions_ownership_{kind}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.update(module.MODULES)
    return modules


MODULES: dict[str, tuple[str, str]] = _gather()

# The author's own test of each replaced module (the example's tests test the example).
TEST = '''"""Tests of $module.py, the author's."""

from __future__ import annotations

import importlib


def test_module_imports() -> None:
    assert "Replaced by the author" in (importlib.import_module("$pkg.$module").__doc__ or "")
'''

# The author's serve plan for the replaced package: their own grouping (one generative serve,
# one pooling serve), another tiny-model script (the <reason> tags), flags for the replaced
# instances, what is not served here and why, and expectations of the replaced behaviour.
SERVE_PLAN = '''"""The smoke serve of the replaced package: the author's."""

from __future__ import annotations

from typing import Any

SERVES: dict[str, dict[str, Any]] = {
    "generate": {
        "checkpoint": {
            "tiny": {
                "architecture": "LlamaForCausalLM",
                "script": {"reasoning_tags": ["<reason>", "</reason>"]},
            }
        },
        "instances": $generate,
        "api_key": True,
        "vllm_plugins": True,
    },
    "pooling": {
        "checkpoint": {"tiny": {}},
        "model": "pooling",
        "instances": $pooling,
    },
    "offload": {"checkpoint": {"tiny": {}}, "instances": $offload},
}
ARGS: dict[str, list[Any]] = $args
ENV: dict[str, dict[str, str]] = $env
NOT_SERVED: dict[str, str] = $not_served


def expect_endpoint(server: Any) -> None:
    assert server.ok("$route") == {"ok": True}


def expect_worker_extension(server: Any) -> None:
    results = server.ok("/collective_rpc", {"method": "report_pid"})["results"]
    assert {r["pid"] for r in results} == {p for p, c in server.members if "VLLM::Worker" in c}


EXPECT: dict[str, Any] = {
    "$endpoint": expect_endpoint,
    "worker_extension": expect_worker_extension,
}
'''
