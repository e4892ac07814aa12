from vllm.transformers_utils.config import HFConfigParser


class HandwrittenConfigParser(HFConfigParser):
    """config.json, read as vLLM reads it (`--config-format handwritten`)."""
