"""What an author writes in place of each kind's example (issue 20): a different but valid
implementation of vLLM's interface, as a real plugin has on day one. Each is a
`string.Template` of the whole module: $pkg the package, $cls the instance's class (the name
the glue and the template-owned checks know), $name the instance's name in vLLM, $ep its entry
point, $P the package's class prefix.

None keeps the example's behaviour that the template's checks used to require: no
`general._configured`, no `validate_params`, no ping method, a quantization config that reads
a config file, a detector switched by another variable, a route with another reply, a parser
of another format, a connector that never loads, a model of another architecture.
"""

from __future__ import annotations

HEADER = '"""Replaced by the author: {what}."""\n\nfrom __future__ import annotations\n\n'

MODULES: dict[str, tuple[str, str]] = {
    "general": (
        "a hook that records the processes it ran in",
        """import os

RAN_IN: list[int] = []


def setup() -> None:
    if os.getpid() not in RAN_IN:
        RAN_IN.append(os.getpid())
""",
    ),
    "model": (
        "a Qwen2-shaped model (a tiny Llama cannot serve it)",
        """from vllm.model_executor.models.qwen2 import Qwen2ForCausalLM


class $cls(Qwen2ForCausalLM):
    pass
""",
    ),
    "tool_parser": (
        "calls written as a Python list, [get_weather(city='Paris')]",
        """import ast
import json
from collections.abc import Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaMessage,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.tool_parsers import ToolParser


def _calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return []
    if not isinstance(tree, ast.List):
        return []
    calls = []
    for node in tree.elts:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return []
        calls.append((node.func.id, {k.arg: ast.literal_eval(k.value) for k in node.keywords}))
    return calls


class $cls(ToolParser):
    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        calls = _calls(model_output)
        if not calls:
            return ExtractedToolCallInformation(
                tools_called=False, tool_calls=[], content=model_output
            )
        tool_calls = [
            ToolCall(function=FunctionCall(name=name, arguments=json.dumps(arguments)))
            for name, arguments in calls
        ]
        return ExtractedToolCallInformation(tools_called=True, tool_calls=tool_calls, content=None)

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        if current_text.lstrip().startswith("["):
            return None  # a list of calls: sent whole by extract_tool_calls
        return DeltaMessage(content=delta_text)
""",
    ),
    "reasoning_parser": (
        "reasoning between <reason> tags",
        """from vllm.reasoning.basic_parsers import BaseThinkingReasoningParser


class $cls(BaseThinkingReasoningParser):
    @property
    def start_token(self) -> str:
        return "<reason>"

    @property
    def end_token(self) -> str:
        return "</reason>"
""",
    ),
    "custom_op": (
        "RMSNorm computed by hand in float32",
        """from typing import Any

import torch
from vllm.model_executor.layers.layernorm import RMSNorm


class $cls(RMSNorm):
    def forward_native(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> Any:
        if residual is not None:
            x = x + residual
            residual = x
        variance = x.float().pow(2).mean(dim=-1, keepdim=True)
        out = (x.float() * torch.rsqrt(variance + self.variance_epsilon)).to(x.dtype)
        out = out * self.weight
        return out if residual is None else (out, residual)

    def forward_cpu(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward_native(*args, **kwargs)
""",
    ),
    "pluggable_layer": (
        "a layer that counts its calls",
        """from typing import Any

from vllm.model_executor.layers.linear import RowParallelLinear


class $cls(RowParallelLinear):
    calls = 0

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        type(self).calls += 1
        return super().forward(*args, **kwargs)
""",
    ),
    "attention_backend": (
        "vLLM's CPU backend as it is",
        """from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend


class $cls(CPUAttentionBackend):
    pass
""",
    ),
    "quantization": (
        "a method that reads its own config file from the checkpoint",
        """from typing import Any

import torch
from vllm.model_executor.layers.linear import LinearBase, UnquantizedLinearMethod
from vllm.model_executor.layers.quantization.base_config import (
    QuantizationConfig,
    QuantizeMethodBase,
)


class $cls(QuantizationConfig):
    def __init__(self, bits: int = 16) -> None:
        super().__init__()
        self.bits = bits

    def get_name(self) -> Any:
        return "$name"

    def get_supported_act_dtypes(self) -> list[torch.dtype]:
        return [torch.float32, torch.bfloat16, torch.float16]

    @classmethod
    def get_min_capability(cls) -> int:
        return 0

    @staticmethod
    def get_config_filenames() -> list[str]:
        return ["$name.json"]

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "$cls":
        return cls(bits=int(config.get("bits", 16)))

    def get_quant_method(self, layer: torch.nn.Module, prefix: str) -> QuantizeMethodBase | None:
        return UnquantizedLinearMethod() if isinstance(layer, LinearBase) else None
""",
    ),
    "model_loader": (
        "a loader that reads the safetensors files itself",
        """from pathlib import Path

import torch
from safetensors.torch import load_file
from vllm.config import ModelConfig
from vllm.model_executor.model_loader.base_loader import BaseModelLoader


class $cls(BaseModelLoader):
    def download_model(self, model_config: ModelConfig) -> None:
        pass  # local checkpoints only

    def load_weights(self, model: torch.nn.Module, model_config: ModelConfig) -> None:
        for path in sorted(Path(model_config.model).glob("*.safetensors")):
            model.load_weights(load_file(str(path)).items())  # type: ignore[operator]
""",
    ),
    "kv_connector": (
        "a connector that never has anything to load",
        """from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
)


class $cls(KVConnectorBase_V1):
    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        pass

    def wait_for_layer_load(self, layer_name: str) -> None:
        pass

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kw: Any) -> None:
        pass

    def wait_for_save(self) -> None:
        pass

    def get_num_new_matched_tokens(
        self, request: Any, num_computed_tokens: int
    ) -> tuple[int | None, bool]:
        return 0, False

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        pass

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        return KVConnectorMetadata()
""",
    ),
    "ec_connector": (
        "vLLM's example connector as it is",
        """from vllm.distributed.ec_transfer.ec_connector.example_connector import (
    ECExampleConnector,
)


class $cls(ECExampleConnector):
    pass
""",
    ),
    "kv_offload_spec": (
        "vLLM's CPU offloading spec as it is",
        """from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec


class $cls(CPUOffloadingSpec):
    pass
""",
    ),
    "lora_resolver": (
        "adapters listed in a JSON variable, name to folder",
        """import json
import os

from vllm.lora.request import LoRARequest
from vllm.lora.resolver import LoRAResolver


class $cls(LoRAResolver):
    async def resolve_lora(self, base_model_name: str, lora_name: str) -> LoRARequest | None:
        known = json.loads(os.environ.get("${PKG}_ADAPTERS", "{}"))
        if lora_name not in known:
            return None
        return LoRARequest(lora_name, len(known) + sorted(known).index(lora_name), known[lora_name])
""",
    ),
    "sleep_mode_backend": (
        "vLLM's CuMem backend as it is",
        """from vllm.device_allocator.sleep_mode_backend import CuMemBackend


class $cls(CuMemBackend):
    pass
""",
    ),
    "kv_cache_dtype": (
        "a float16 KV cache",
        """import torch
from vllm.v1.kv_cache_interface import KVQuantMode, get_kv_quant_mode


class $cls:
    name = "$name"

    def torch_dtype(self) -> torch.dtype:
        return torch.float16

    def quant_mode(self) -> KVQuantMode:
        return get_kv_quant_mode("float16")
""",
    ),
    "platform": (
        "vLLM's CPU platform, on when ${PKG}_USE_CPU is set, with vLLM's own worker",
        """import os


def detect_platform() -> str | None:
    return f"{__name__}.${P}Platform" if os.environ.get("${PKG}_USE_CPU") else None


def __getattr__(name: str) -> type:
    if name != "${P}Platform":
        raise AttributeError(name)
    from vllm.platforms.cpu import CpuPlatform

    cls = type(name, (CpuPlatform,), {"__module__": __name__, "device_name": "acme_cpu"})
    globals()[name] = cls
    return cls
""",
    ),
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
    "endpoint": (
        'a route that answers {"ok": true}',
        """from typing import Any

from fastapi import FastAPI


class $cls:
    name = "$ep"
    required_tasks = None

    def attach_router(self, app: FastAPI) -> None:
        @app.get("$name")
        async def ok() -> dict[str, bool]:
            return {"ok": True}

    async def init_state(self, engine_client: Any, state: Any, args: Any) -> None:
        pass


def create_endpoint_plugin() -> $cls:
    return $cls()
""",
    ),
    "io_processor": (
        'one text per request, {"prompt": "..."}, and its embedding\'s norm back',
        """from collections.abc import Sequence
from typing import Any

from vllm.inputs import TextPrompt
from vllm.outputs import PoolingRequestOutput
from vllm.plugins.io_processors.interface import IOProcessor
from vllm.pooling_params import PoolingParams


def io_processor_qualname() -> str:
    return f"{__name__}.$cls"


class $cls(IOProcessor[str, dict[str, float]]):
    def parse_data(self, data: object) -> str:
        if not (isinstance(data, dict) and isinstance(data.get("prompt"), str)):
            raise ValueError('data must be {"prompt": "..."}')
        return data["prompt"]

    def pre_process(self, prompt: str, request_id: str | None = None, **kw: Any) -> TextPrompt:
        return TextPrompt(prompt=prompt)

    def merge_pooling_params(self, params: PoolingParams | None = None) -> PoolingParams:
        params = params or PoolingParams()
        params.task = params.task or "embed"
        return params

    def post_process(
        self, model_output: Sequence[PoolingRequestOutput], request_id: str | None = None, **kw: Any
    ) -> dict[str, float]:
        return {"norm": float(model_output[0].outputs.data.norm())}
""",
    ),
    "logits_processor": (
        "a pass-through processor, without validate_params",
        """from typing import Any

import torch
from vllm.v1.sample.logits_processor import LogitsProcessor


class $cls(LogitsProcessor):
    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.steps = 0

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: Any) -> None:
        self.steps += 1

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits
""",
    ),
    # The same for Model Runner V2's interface (the only one from vLLM 0.34).
    "logits_processor/v2": (
        "a pass-through processor, without validate_params",
        """from typing import Any

import torch
from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor


class $cls(LogitsProcessor):
    def __init__(self, vllm_config: Any, req_states: Any) -> None:
        self.steps = 0

    def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        self.steps += 1
        return logits
""",
    ),
    "scheduler": (
        "a scheduler that counts its steps",
        """from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler


class $cls(Scheduler):
    steps = 0

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        type(self).steps += 1
        return super().schedule(*args, **kwargs)
""",
    ),
    "worker_extension": (
        "an extension with another method, report_pid",
        """import os
from typing import Any


class $cls:
    def report_pid(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "rank": getattr(self, "rank", None)}
""",
    ),
    "model_class_override": (
        "vLLM's Llama with its logits computed through the parent",
        """from typing import Any

from vllm.model_executor.models.llama import LlamaForCausalLM


class $cls(LlamaForCausalLM):
    def compute_logits(self, *args: Any, **kwargs: Any) -> Any:
        return super().compute_logits(*args, **kwargs)
""",
    ),
    "patch": (
        "a patch that counts the calls",
        """from collections.abc import Callable
from typing import Any

CALLS = [0]


def replacement(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    CALLS[0] += 1
    return original(*args, **kwargs)
""",
    ),
}

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
