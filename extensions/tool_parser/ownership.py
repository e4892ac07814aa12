"""What an author writes in place of the tool_parser kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
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
}
