"""Helpers of tier 3 (tests/test_serve.py): tiny checkpoints and a real `vllm serve`."""
