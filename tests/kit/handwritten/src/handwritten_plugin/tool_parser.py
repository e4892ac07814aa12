from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser


class HandwrittenToolParser(Hermes2ProToolParser):
    """Hermes-style <tool_call> JSON."""
