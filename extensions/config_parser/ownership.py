"""What an author writes in place of the config_parser kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "config_parser": (
        "a parser that reads config.json itself, through AutoConfig",
        """import json
from pathlib import Path
from typing import Any

from transformers import AutoConfig, PretrainedConfig
from vllm.transformers_utils.config_parser_base import ConfigParserBase


class $cls(ConfigParserBase):
    def parse(
        self,
        model: str | Path,
        trust_remote_code: bool,
        revision: str | None = None,
        code_revision: str | None = None,
        **kwargs: Any,
    ) -> tuple[dict[str, Any], PretrainedConfig]:
        config_dict = json.loads((Path(model) / "config.json").read_text())
        config = AutoConfig.for_model(**config_dict)
        return config_dict, config
""",
    ),
}
