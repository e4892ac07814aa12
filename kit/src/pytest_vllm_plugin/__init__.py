"""pytest-vllm-plugin: checks a vLLM plugin the way vLLM uses it (vllm-plugin-template's kit)."""

from importlib.metadata import version

__version__ = version("pytest-vllm-plugin")
