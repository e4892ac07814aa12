"""pytest-vllm-plugin: checks a vLLM plugin the way vLLM uses it (the kit of vllm-plugin-template)."""

from importlib.metadata import version

__version__ = version("pytest-vllm-plugin")
