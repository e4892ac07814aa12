"""What an author writes in place of the reasoning_parser kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
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
}
