"""What an author writes in place of the io_processor kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
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
}
