"""The patch kind has no built-in names and no builtins.json: its data is the patch targets
(extensions/patch/targets/<target>/), every module, class and function of the wheel, written
and checked by tools/vllm_facts.py (PATCH_TARGETS)."""

RECIPE = None
