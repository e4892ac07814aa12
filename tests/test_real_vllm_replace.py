"""Tier 2, replacing vLLM's own on purpose (issue 14): examples/replace-builtins.yml, one
instance per kind whose registry can replace a built-in, each taking one of vLLM's names,
inside real vLLM in each target, in fresh processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import CATALOG, EXAMPLE_TARGETS, REPLACE_BUILTINS, instances, render_file
from realvllm import envs
from test_real_vllm import _run, _suite_loaders_and_lint

pytestmark = pytest.mark.real_vllm

# In a fresh process: vLLM loads its plugins, then imports every module a step waits for (as
# serving would, over its processes), and register() runs again. What each step logged.
WARNINGS_SCRIPT = """
import importlib, json, logging, sys
# vLLM first: importing it configures logging, and some releases (0.30) disable the loggers
# that exist by then.
from vllm.plugins import load_general_plugins
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("vllm." + sys.argv[1]).addHandler(handler)
load_general_plugins()
plugin = importlib.import_module(sys.argv[1] + "._plugin")
for module in list(getattr(plugin, "_waiting", {})):  # steps waiting for a module, if any
    importlib.import_module(module)
plugin.register()
print("REPLACED " + json.dumps({
    "done": sorted(plugin._done),
    "warnings": [r for r in records if " replaces " in r],
    "replaces": {key: list(row) for key, row in plugin.REPLACES.items()},
}))
"""


def _kinds_in(target: str) -> list[str]:
    """The example's kinds that exist in `target` (kv_cache_dtype starts in 0.33)."""
    kinds = yaml.safe_load(REPLACE_BUILTINS.read_text())["kinds"]
    return [k for k in kinds if target in CATALOG[k]["targets"]]


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_replacing_builtins_resolves_them_to_the_plugin(target: str, tmp_path: Path) -> None:
    """Every instance takes one of vLLM's own names (a GPU attention backend member among
    them): the generated suite's loader checks resolve each name, through vLLM's own lookup,
    to the plugin's class; each replacement logs exactly one WARNING per process, naming what
    it replaced, the package and the class, and a second register() logs nothing more."""
    env = envs.ensure(target)
    kinds = _kinds_in(target)
    project = render_file(
        tmp_path / "override", REPLACE_BUILTINS, vllm_target=target, kinds=json.dumps(kinds)
    )
    keys = set(instances(project))
    assert {key.partition(":")[0] for key in keys} == set(kinds), keys
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == keys | {"lazy"}, ok ^ (keys | {"lazy"})

    paths = envs.install_overlay(env, project, tmp_path / "site")
    out = _run([str(env.python), "-c", WARNINGS_SCRIPT, "acme_override"], tmp_path, paths)
    seen = json.loads(out.split("REPLACED ", 1)[1].splitlines()[0])
    assert set(seen["done"]) == keys, set(seen["done"]) ^ keys
    assert set(seen["replaces"]) == keys, set(seen["replaces"]) ^ keys
    expected = [
        f"acme_override replaces {what}{f' ({was})' if was else ''} with {ours}"
        for what, was, ours in seen["replaces"].values()
    ]
    assert sorted(seen["warnings"]) == sorted(expected), seen["warnings"]
    assert any("vLLM's attention backend FLASH_ATTN" in w for w in seen["warnings"])
