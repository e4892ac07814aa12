"""The registration kind has no built-in names and no builtins.json: the registries it may
call are checked against the patch kind's data (extensions/patch/targets/<target>/), every
module, class and function of the wheel."""

RECIPE = None
