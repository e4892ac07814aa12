"""Built-in-name recipes: where each kind's built-in names live in vLLM's source.

Each kind's recipe is its own file, extensions/<kind>/recipe.py, defining `RECIPE`: a Recipe,
or None for a kind with no builtins.json (patch: its data is the patch targets, written by
tools/vllm_facts.py). `load` reads them in the order of extensions/vllm.yml `kinds`; a kind
without a recipe.py is an error that names the file.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools import extractors as ex
from tools.wheelsrc import Wheel

EXTENSIONS = Path(__file__).resolve().parent.parent / "extensions"


@dataclass(frozen=True)
class Recipe:
    """Where one kind's built-in names come from. `names` gives the `names` list; `extras` the
    kind's other fields; `present` says whether the kind exists in a wheel at all."""

    what: str
    names: ex.Values
    extras: dict[str, ex.Values] = field(default_factory=dict)
    present: Callable[[Wheel], bool] | None = None


CUSTOM_OP = "vllm.model_executor.custom_op"


def built_classes(what: str, cls: str, fields: tuple[str, ...]) -> Recipe:
    """The classes vLLM builds from `cls` (CustomOp, PluggableLayer, both defined in
    vllm.model_executor.custom_op), which a plugin replaces by class name
    (extractors.built_subclasses), with the given extra views."""
    return Recipe(
        what,
        ex.built_subclasses(CUSTOM_OP, cls, "names"),
        {field: ex.built_subclasses(CUSTOM_OP, cls, field) for field in fields},
    )


def load(extensions: Path = EXTENSIONS) -> dict[str, Recipe]:
    """{kind: Recipe} from every listed kind's extensions/<kind>/recipe.py, in vllm.yml order
    (a kind whose RECIPE is None has no builtins.json and is left out). A listed kind whose
    folder has no kind.yml yet is skipped, as everywhere else."""
    kinds = yaml.safe_load((extensions / "vllm.yml").read_text()).get("kinds") or []
    recipes: dict[str, Recipe] = {}
    for kind in kinds:
        if not (extensions / kind / "kind.yml").is_file():
            continue
        path = extensions / kind / "recipe.py"
        if not path.is_file():
            raise FileNotFoundError(
                f"kind {kind}: no {path} (every kind says where its built-in names live:"
                " RECIPE = Recipe(...), or RECIPE = None for a kind without builtins.json)"
            )
        spec = importlib.util.spec_from_file_location(f"extensions_recipe_{kind}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not hasattr(module, "RECIPE"):
            raise AttributeError(f"kind {kind}: {path} defines no RECIPE")
        if module.RECIPE is not None:
            recipes[kind] = module.RECIPE
    return recipes
