"""What an author writes in place of the model_loader kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
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
}
