"""Inside the peer tier's runs of vLLM's tests (copied into each run folder as peer_inner.py).

A pytest plugin (`-p peer_inner`), loaded in the vLLM environment's pytest:

- deselects the tests the plan excludes, each with its reason, printed in the summary;
- runs the tests the plan marks `engine` under the machine-wide serve lock (tests/serve/
  runner.py's LOCK: one vLLM engine at a time on this machine);
- writes every collected test's outcome, the deselected ones and the exclusions that matched
  nothing, as JSON, for tests/test_peer.py to compare.

And the stand-ins that tests/peer/adaptations.yml puts in vLLM's tests in place of the hub:
`tiny(kind)` (a tiny offline checkpoint) and `adapter(...)` (a LoRA adapter's folder).
The plan (a JSON file) is named by $PEER_PLAN. Also run as a script, to build the tiny
checkpoints: `python inner.py tiny DEST TINY_MODEL_SCRIPT` (in a vLLM environment).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

PLAN_ENV = "PEER_PLAN"


def tiny(kind: str) -> str:
    """The tiny offline checkpoint `kind` ("llama": with weights; "opt": config and tokenizer
    of an OPT named MyOPTForCausalLM, for load_format="dummy"), built by tests/test_peer.py."""
    return os.environ[f"PEER_TINY_{kind.upper()}"]


def adapter(name: str, peft_type: str, base_model: str) -> str:
    """A folder holding what decides a resolver's answer about a hub adapter: its
    adapter_config.json (peft_type, base_model_name_or_path)."""
    path = Path(tempfile.mkdtemp(prefix="peer-adapter-")) / name
    path.mkdir(parents=True)
    config = {"peft_type": peft_type, "base_model_name_or_path": base_model, "r": 8}
    (path / "adapter_config.json").write_text(json.dumps(config) + "\n")
    return str(path)


def global_cleanup_works() -> bool:
    """Whether vLLM's per-test cleanup (tests/conftest.py: cleanup_dist_env_and_memory) can
    run here: on a platform other than CPU it calls torch.accelerator.empty_cache(), which
    raises where torch has no accelerator (the CUDA wheel on CPU torch; vLLM's dummy
    platform on a CPU machine)."""
    import torch
    from vllm.platforms import current_platform

    return current_platform.is_cpu() or torch.accelerator.is_available()


def _plan() -> dict[str, Any]:
    return json.loads(Path(os.environ[PLAN_ENV]).read_text())


def _file_of(item: pytest.Item) -> str:
    """The item's test file, relative to tests/plugins_tests/."""
    rel = item.nodeid.split("::", 1)[0]
    return rel.split("tests/plugins_tests/", 1)[-1]


class PeerPlugin:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.outcomes: dict[str, str] = {}
        self.details: dict[str, str] = {}
        self.deselected: dict[str, str] = {}
        self.collected: list[str] = []
        self.collect_errors: dict[str, str] = {}
        self.matched: set[tuple[str, str]] = set()
        self.durations: dict[str, float] = {}
        self.lock_waits: dict[str, float] = {}

    def _listed(self, item: pytest.Item, table: str) -> Any:
        entry = self.plan[table].get(_file_of(item), {})
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        for key in (item.name, name):
            if key in entry:
                self.matched.add((table, f"{_file_of(item)}::{key}"))
                return entry[key] if isinstance(entry, dict) else True
        return None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        keep, drop = [], []
        for item in items:
            self.collected.append(item.nodeid)
            reason = self._listed(item, "exclude")
            if reason is None:
                keep.append(item)
            else:
                self.deselected[item.nodeid] = reason
                drop.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors[report.nodeid] = str(report.longrepr)[-4000:]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any):
        if self._listed(item, "lock") is None:
            return (yield)
        with open(self.plan["lock_path"], "a") as lock:
            waited = time.monotonic()
            fcntl.flock(lock, fcntl.LOCK_EX)  # bounded by the run's own timeout
            self.lock_waits[item.nodeid] = round(time.monotonic() - waited, 1)
            try:
                return (yield)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + report.duration
        if report.when == "call" or report.outcome != "passed":
            previous = self.outcomes.get(nodeid)
            # The worst phase wins: a setup or teardown error is "error in setup/teardown"
            # (after a call that passed: the test's assertions held, a fixture failed).
            if previous in (None, "passed"):
                outcome = report.outcome
                if report.when != "call" and report.failed:
                    outcome = f"error in {report.when}"
                self.outcomes[nodeid] = outcome
            if report.outcome != "passed":
                text = f"[{report.when}] {str(report.longrepr)[-2500:]}\n"
                self.details[nodeid] = self.details.get(nodeid, "") + text

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # An entry of a collected file that matched no test is stale data (a file that did
        # not collect is reported as a collection error instead).
        seen = {
            nodeid.split("::", 1)[0].split("tests/plugins_tests/", 1)[-1]
            for nodeid in self.collected
        }
        unmatched = {
            table: [
                f"{file}::{name}"
                for file, names in self.plan[table].items()
                for name in names
                if file in seen and (table, f"{file}::{name}") not in self.matched
            ]
            for table in ("exclude", "lock")
        }
        result = {
            "collected": self.collected,
            "outcomes": self.outcomes,
            "details": self.details,
            "deselected": self.deselected,
            "collect_errors": self.collect_errors,
            "unmatched": unmatched,
            "durations": {k: round(v, 2) for k, v in self.durations.items()},
            "lock_waits": self.lock_waits,
        }
        Path(self.plan["report"]).write_text(json.dumps(result, indent=1) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.deselected:
            terminalreporter.section("peer tier: excluded (deselected), with the reason")
            for nodeid, reason in self.deselected.items():
                terminalreporter.write_line(f"{nodeid}: {reason}")


def pytest_configure(config: pytest.Config) -> None:
    if PLAN_ENV in os.environ:
        config.pluginmanager.register(PeerPlugin(_plan()), "peer_tier")


def build_tiny(dest: Path, tiny_model_script: Path) -> None:
    """dest/llama: the template's tiny offline checkpoint (the test kit's pytest_vllm_plugin.tiny,
    by path); dest/opt: its tokenizer with a tiny OPT config naming MyOPTForCausalLM (vLLM's
    dummy model, and the generated package standing in for it), no weights."""
    import importlib.util
    import shutil

    from transformers import OPTConfig

    spec = importlib.util.spec_from_file_location("tiny_model", tiny_model_script)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    llama = module.build(dest / "llama")
    opt = dest / "opt"
    opt.mkdir(parents=True, exist_ok=True)
    for f in llama.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, opt / f.name)
    vocab = json.loads((llama / "config.json").read_text())["vocab_size"]
    config = OPTConfig(
        vocab_size=vocab,
        hidden_size=64,
        ffn_dim=128,
        num_hidden_layers=2,
        num_attention_heads=2,  # head size 32: vLLM's CPU attention needs at least 32
        max_position_embeddings=256,
        word_embed_proj_dim=64,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        torch_dtype="float32",
    )
    config.architectures = ["MyOPTForCausalLM"]
    config.to_json_file(str(opt / "config.json"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["tiny"]:
        build_tiny(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(f"usage: {sys.argv[0]} tiny DEST TINY_MODEL_SCRIPT")
