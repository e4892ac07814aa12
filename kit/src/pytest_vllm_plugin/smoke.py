"""vLLM's contract in a serve, one check per kind of vLLM extension: that vLLM built and used
the plugin's class (the worker's modules, the serve's log, its config), never what the
plugin's code does, so that each passes for any valid implementation.

Each check is `<kind>(*details, server=server)`: the instance's details as its row of the
plugin's loader checks gives them (tests/vllm_checks.py CHECKS: name, module, class, and what
the kind adds), then the running serve (pytest_vllm_plugin.serve.Server). rows() turns those
rows into these checks, so a plugin's tests/test_smoke_serve.py copies none of them; Smoke
(pytest_vllm_plugin.serve) calls each in the serve that switches its instance on. A check that
cannot apply here skips, saying why.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pytest_vllm_plugin.serve import Server, role

# The processes a patch may name (`processes:`); role() names each process of a serve.
ROLES = frozenset({"front end", "engine core", "worker"})
# A prompt of 160 token ids: more than one KV block (128 on CPU), so KV is stored and reused.
LONG_PROMPT = list(range(3, 163))


def model(
    name: str, module: str, class_name: str, aliases: Sequence[str] = (), *, server: Server
) -> None:
    """The serve's checkpoint names the architecture (its config.json), and the worker's model
    is the plugin's class (or vLLM's pooling adapter subclassing it). A checkpoint of the
    instance's own model type is one transformers alone cannot read: the serve read it
    through the plugin's registration. A pooling architecture (served with --runner pooling
    --convert embed) answers /v1/embeddings."""
    from transformers import LlamaConfig

    config = json.loads((Path(server.model) / "config.json").read_text())
    assert config["architectures"] == [name], (config["architectures"], aliases)
    assert f"Resolved architecture: {name}" in server.log()
    served = server.inspect()["model"]  # the class, or vLLM's adapter around it (pooling)
    assert f"{module}.{class_name}" in served, served
    if config["model_type"] != LlamaConfig.model_type:  # the tiny checkpoint's own type
        read = "import sys, transformers; transformers.AutoConfig.from_pretrained(sys.argv[1])"
        alone = subprocess.run(
            [sys.executable, "-c", read, server.model], capture_output=True, text=True, timeout=120
        )
        assert alone.returncode != 0, "transformers alone read the plugin's model type"
        assert config["model_type"] in alone.stderr, alone.stderr[-2000:]
    if " ".join(server.args).find("--runner pooling") >= 0:
        body = {"model": server.model, "input": ["Hello world", "this is"]}
        data = server.ok("/v1/embeddings", body)["data"]
        assert len(data) == 2 and all(d["embedding"] for d in data), data


def tool_parser(
    name: str, module: str, class_name: str, aliases: Sequence[str] = (), *, server: Server
) -> None:
    """The serve switches the parser on (--tool-call-parser NAME): a chat request offering a
    tool is answered through it, streamed and not (vLLM builds the parser for each such
    request; one that raises fails the request)."""
    assert f"--tool-call-parser {name}" in " ".join(server.args), (module, class_name)
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    choice = server.chat("What is the weather in Paris?", tools=[tool])
    assert choice["finish_reason"] in ("stop", "length", "tool_calls"), choice
    assert server.stream_chat("What is the weather in Paris?", tools=[tool]), "nothing streamed"


def reasoning_parser(
    name: str, module: str, class_name: str, aliases: Sequence[str] = (), *, server: Server
) -> None:
    """The serve switches the parser on (--reasoning-parser NAME): chat requests are answered
    through it, streamed and not (vLLM builds it for each request; one that raises fails it)."""
    assert f"--reasoning-parser {name}" in " ".join(server.args), (module, class_name)
    assert server.chat("What is the weather in Paris?")["message"], "no message"
    assert server.stream_chat("What is the weather in Paris?"), "nothing streamed"


def _replaced_everywhere(
    name: str, module: str, class_name: str, what: str, *, server: Server
) -> None:
    # vLLM builds the plugin's class wherever the served model has the one it replaces (looked
    # up by class name): ours is there and vLLM's own is not; skipped where the model has none.
    modules = server.inspect()["modules"]
    ours = f"{module}.{class_name}" in modules
    builtin = [m for m in modules if m.rpartition(".")[2] == name]
    if not ours and not builtin:
        pytest.skip(f"the served model has no {name}: the {what} is not in its path")
    assert ours and not builtin, f"vLLM's own {name} still serves: {modules}"


def custom_op(name: str, module: str, class_name: str, *, server: Server) -> None:
    """Every op of the class the instance replaces is the plugin's class in the served model
    (vLLM builds it in the op's place; a serve's "output" check shows what it computes)."""
    _replaced_everywhere(name, module, class_name, "op", server=server)


def pluggable_layer(name: str, module: str, class_name: str, *, server: Server) -> None:
    """Every layer of the class the instance replaces is the plugin's class in the served model
    (a serve's "output" check shows what it computes)."""
    _replaced_everywhere(name, module, class_name, "layer", server=server)


def attention_backend(name: str, module: str, class_name: str, *, server: Server) -> None:
    """The served model's attention layers are built from the plugin's backend, vLLM's CPU
    backend NAME overridden (a serve's "output" check shows what they compute)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip(f"{name} is vLLM's CPU backend: a GPU builds its own")
    attention = server.inspect()["attention"]
    assert f"{module}.{class_name}" in attention, attention


def quantization(name: str, module: str, class_name: str, *, server: Server) -> None:
    """The serve runs the plugin's quantization config (--quantization NAME): the front end
    built it, and the worker's linear layers were given their methods by it (a serve's
    "output" check shows what they compute)."""
    config = server.ok("/server_info?config_format=json")["vllm_config"]
    assert config["model_config"]["quantization"] == name, config
    configs = server.inspect()["quant_configs"]
    assert f"{module}.{class_name}" in configs, configs


def model_loader(
    name: str, module: str, class_name: str, replace: bool = False, *, server: Server
) -> None:
    """The workers loaded the weights through the plugin's loader (--load-format NAME): vLLM's
    get_model_loader() knows the format only from the plugin (an unknown one stops the worker),
    and the model generates (a serve's "output" check shows the weights are the checkpoint's)."""
    config = server.ok("/server_info?config_format=json")["vllm_config"]
    assert config["load_config"]["load_format"] == name, (config, module, class_name, replace)
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def config_parser(
    name: str, module: str, class_name: str, replace: bool = False, *, server: Server
) -> None:
    """The front end read the model's configuration through the plugin's parser
    (--config-format NAME): vLLM's get_config_parser() knows the format only from the plugin (an
    unknown one stops the server before it listens), vLLM logged the plugin's class under it,
    and the model generates."""
    config = server.ok("/server_info?config_format=json")["vllm_config"]
    assert config["model_config"]["config_format"] == name, (config, module, class_name, replace)
    registered = f"`<class '{module}.{class_name}'>` with config format `{name}`"
    assert registered in server.log(), server.log()[-5000:]
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def kv_connector(
    name: str,
    module: str,
    class_name: str,
    registration: str = "registry",
    replace: bool = False,
    aliases: Sequence[str] = (),
    *,
    server: Server,
) -> None:
    """The serve's --kv-transfer-config names the connector, vLLM created it (its log names the
    class), and a prompt longer than one KV block is served through it, twice."""
    config = json.loads(server.args[server.args.index("--kv-transfer-config") + 1])
    assert config["kv_connector"] == name, (config, module, replace)
    assert ("kv_connector_module_path" in config) == (registration == "module_path"), config
    assert f"Creating v1 connector with name: {class_name}" in server.log(), server.log()[-5000:]
    for _ in range(2):
        assert server.complete(LONG_PROMPT, max_tokens=4)["token_ids"], "nothing generated"


def kv_offload_spec(
    name: str,
    module: str,
    class_name: str,
    registration: str = "registry",
    replace: bool = False,
    aliases: Sequence[str] = (),
    *,
    server: Server,
) -> None:
    """The OffloadingConnector runs the serve's spec (its `spec_name`); a repeated prompt is
    served again with the same output."""
    assert f'"spec_name": "{name}"' in " ".join(server.args), (module, class_name, replace)
    log = server.log()
    assert f"Creating offloading spec with name: {name}" in log, log[-5000:]
    # Only the module-path variant makes vLLM import the module the config names.
    imported = f"Loading out-of-tree offloading spec '{name}' from '{module}'" in log
    assert imported == (registration == "module_path"), log[-5000:]
    first = server.complete(LONG_PROMPT, max_tokens=4)
    assert server.complete(LONG_PROMPT, max_tokens=4)["token_ids"] == first["token_ids"]


def lora_resolver(name: str, module: str, class_name: str, *, server: Server) -> None:
    """The API server asks its resolvers, the plugin's among them, for an adapter it has not
    loaded: the request is answered (found, or 404 when no resolver finds it), never an error
    of the server."""
    assert "--enable-lora" in server.args, (name, module, class_name)
    body = {"model": "smoke-unknown-adapter", "prompt": "Hello world", "max_tokens": 4}
    status, data = server.request("POST", "/v1/completions", body)
    assert status in (200, 400, 404), (status, data)


def sleep_mode_backend(
    name: str, module: str, class_name: str, replace: bool = False, *, server: Server
) -> None:
    """The serve sleeps and wakes up through its backend (--sleep-mode-backend NAME), and
    serves after waking."""
    assert f"--sleep-mode-backend {name}" in " ".join(server.args), (module, class_name, replace)
    before = server.complete("Hello world")["token_ids"]
    server.ok("/sleep?level=1", {})
    assert server.ok("/is_sleeping")["is_sleeping"] is True
    server.ok("/wake_up", {})
    assert server.ok("/is_sleeping")["is_sleeping"] is False
    assert server.complete("Hello world")["token_ids"] == before


def kv_cache_dtype(name: str, module: str, class_name: str, *, server: Server) -> None:
    """The serve started with the plugin's KV-cache dtype (--kv-cache-dtype NAME) and
    generates with it."""
    config = server.ok("/server_info?config_format=json")["vllm_config"]
    assert config["cache_config"]["cache_dtype"] == name, (config, module, class_name)
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def platform(module: str, *, server: Server) -> None:
    """vLLM ran the serve on the plugin's platform: the worker's current platform is a class of
    the plugin's platform module `module` (what its detector named), and the model answers."""
    found = server.inspect()["platform"]
    assert found.startswith(f"{module}."), found
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def stat_logger(module: str, class_name: str, *, server: Server) -> None:
    """The front end loaded the stat logger from its entry point (vLLM lists it as it loads
    the group, then builds every stat logger it found) and serves requests with it fed each
    step (a logger that raises stops the engine)."""
    assert f" -> {module}:{class_name}" in server.log(), server.log()[-5000:]
    for _ in range(2):
        assert server.complete("Hello world", max_tokens=8)["token_ids"], "nothing generated"


def endpoint(route: str, module: str, class_name: str, entry_point: str, *, server: Server) -> None:
    """vLLM loaded the endpoint plugin (VLLM_PLUGINS names it; vLLM logs its name) and the API
    server has its route."""
    assert f"Loaded endpoint plugin {entry_point}" in server.log(), (module, class_name)
    paths = server.ok("/openapi.json")["paths"]
    assert route in paths, sorted(paths)


def io_processor(module: str, class_name: str, entry_point: str, *, server: Server) -> None:
    """The serve asks for the processor by its entry-point name (--io-processor-plugin NAME),
    vLLM found it in its group, and the pooling server it built at start-up is healthy."""
    asked = server.args[server.args.index("--io-processor-plugin") + 1]
    assert asked == entry_point, (asked, entry_point)
    assert f"- {entry_point} -> {module}" in server.log(), (class_name, server.log()[-5000:])


def logits_processor(module: str, class_name: str, interface: str, *, server: Server) -> None:
    """The worker's model runner built the processor (vLLM loads every installed one for a
    generative model), and requests are served with it in the batch."""
    built = server.inspect()["logits_processors"]
    assert f"{module}.{class_name}" in built, (interface, built)
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def scheduler(module: str, class_name: str, *, server: Server) -> None:
    """The engine core was configured with the plugin's scheduler (--scheduler-cls) and serves
    requests with it."""
    name = f"{module}.{class_name}"
    lines = [line for line in server.log().splitlines() if "Using custom scheduler class" in line]
    assert any(name in line and "EngineCore" in line for line in lines), lines
    assert server.complete("Hello world")["token_ids"], "nothing generated"


def worker_extension(module: str, class_name: str, *, server: Server) -> None:
    """vLLM extended every worker of the serve with the plugin's class (--worker-extension-cls):
    it is in the workers' classes."""
    worker = server.inspect()["worker"]
    assert f"{module}.{class_name}" in worker, worker


def model_class_override(name: str, module: str, class_name: str, *, server: Server) -> None:
    """For a checkpoint of the overridden architecture, the worker's model is the plugin's
    class, not vLLM's own."""
    assert f'"{name}": "{module}:{class_name}"' in " ".join(server.args), server.args
    config = json.loads((Path(server.model) / "config.json").read_text())
    assert config["architectures"] == [name], config
    modules = server.inspect()["modules"]
    assert f"{module}.{class_name}" in modules, modules


def patch(
    name: str,
    target: str,
    module: str,
    processes: str | list[str] = "all",
    on_mismatch: str = "fail",
    *,
    server: Server,
) -> None:
    """The trace: the patch applied in the serve's processes of the roles it names, at most
    once in each, and in no other; its target's module imported in each of them (the output
    check of this serve shows a pass-through patch leaves the output unchanged)."""
    events = [e for e in server.trace("patch") if e["step"] == f"patch:{name}"]
    applied = [e for e in events if e["applied"]]
    pids = [e["pid"] for e in applied]
    assert len(pids) == len(set(pids)), f"applied twice in a process: {applied}"
    assert not [e for e in events if e.get("why", "not in this process") != "not in this process"]
    where = {role(e) for e in applied}
    if processes == "all":
        assert applied, f"{target}: no process of the serve imported {target.partition(':')[0]}"
        assert not [e for e in events if not e["applied"]], (events, module, on_mismatch)
    else:
        named = ROLES & set(processes)
        assert where == named, f"applied in {sorted(where)}, named {sorted(named)}: {events}"
    server.report(patch=name, applied_in=sorted(where))


def ec_connector(
    name: str,
    module: str,
    class_name: str,
    registration: str = "registry",
    replace: bool = False,
    aliases: Sequence[str] = (),
    *,
    server: Server,
) -> None:
    """No serve check yet: an encoder-cache connector acts only for multimodal requests (the
    plugin's own tests save and load encoder outputs; the loader check proves vLLM's factory
    builds it)."""
    pytest.skip(f"{name}: vLLM's contract for an encoder-cache connector has no serve check yet")


def registration(
    name: str,
    module: str,
    class_name: str,
    call: str,
    lookup: str,
    pass_as: str = "class",
    form: str = "call",
    *,
    server: Server,
) -> None:
    """No serve check: a registration into any registry has no serve contract of its own (what
    reads the name is the registry owner's); the loader check asks the registry's lookup."""
    pytest.skip(f"{name}: a registration with {call} has no serve contract ({lookup} is checked)")


# The kinds this module checks: its public functions but rows().
KINDS = frozenset(
    n
    for n, f in dict(globals()).items()
    if inspect.isfunction(f) and f.__module__ == __name__ and not n.startswith("_")
) - {"rows"}


def rows(checks: dict[str, tuple[Any, ...]]) -> dict[str, Callable[..., None]]:
    """The serve check of each row of a plugin's loader checks (tests/vllm_checks.py CHECKS:
    the kind, then the instance's details): this module's check of that kind with those
    details. A row of a kind without one (the general step, a model's configuration) or
    without details (a kind of one instance: its module and class come from the plugin's
    test_smoke_serve.py) has none."""
    return {
        step: partial(globals()[kind], *args)
        for step, (kind, *args) in checks.items()
        if kind in KINDS and args
    }
