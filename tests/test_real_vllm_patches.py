"""Tier 2, patches (issue 15): examples/patches.yml and the patch glue inside real vLLM, in fresh
processes (helpers in test_real_vllm.py; split so that xdist spreads tier 2 over the workers).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import (
    CATALOG,
    EXAMPLE_TARGETS,
    FULL_TARGETS,
    PATCHES,
    ROOT,
    TARGETS,
    VLLM,
    changed_method,
    render_file,
)
from realvllm import envs
from test_real_vllm import ENV, _run, _suite_loaders_and_lint, answered

pytestmark = pytest.mark.real_vllm


# What examples/patches.yml promises (issue 15): these patches, each in exactly these processes.
PATCHES_PROMISED = {
    "patch:count_schedule": ["engine core"],
    "patch:wrap_build_app": ["front end"],
    "patch:check_inputs": ["front end"],
    "patch:time_execute_model": ["worker"],
    "patch:own_deepseek_r1": ["front end"],
    "patch:edit_olmo3": ["front end"],
    "patch:edit_gptoss": ["front end"],
}


@pytest.mark.parametrize("target", EXAMPLE_TARGETS)
def test_patches_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """examples/patches.yml: every target exists in this vLLM as recorded, each patch applies
    exactly once after 3 register() calls and a re-import, is reversible, and the instance's own
    test passes; lint."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "patches", PATCHES, vllm_target=target)
    named = {f"patch:{p['name']}": p["processes"] for p in answered(project, "patch_targets")}
    assert named == PATCHES_PROMISED, named
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == {*PATCHES_PROMISED, "lazy"}, ok


# A patch whose target moved between two releases of the plugin's range (issue 36):
# make_arg_parser left vllm.entrypoints.launchers.cli_args for vllm.entrypoints.common.cli_args
# in vLLM 0.33 (extensions/patch/targets).
MOVED = {
    "0.32": "vllm.entrypoints.launchers.cli_args:make_arg_parser",
    "0.33": "vllm.entrypoints.common.cli_args:make_arg_parser",
}


# Its module, transformed from Python start (when: before_vllm): `vllm serve` imports it before
# vLLM loads plugins.
MOVED_MODULES = {r: t.partition(":")[0] for r, t in MOVED.items()}
EARLY_MOVED = {"target": MOVED_MODULES, "name": "early_cli_args", "how": "transform"}


@pytest.fixture(scope="module")
def moved_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugin for vLLM 0.32 to 0.33 patching make_arg_parser, its target given per release,
    and transforming its module from Python start."""
    answers = tmp_path_factory.mktemp("moved") / "moved.yml"
    patch = {"target": MOVED, "name": "make_arg_parser"}
    early = {**EARLY_MOVED, "when": "before_vllm", "processes": ["front end"]}
    data = {"project_name": "acme", "kinds": ["patch"], "patch_targets": [patch, early]}
    answers.write_text(json.dumps({**data, "vllm_target": "0.33", "vllm_oldest": "0.32"}))
    return render_file(answers.parent / "moved", answers)


@pytest.mark.parametrize("target", sorted(MOVED))
def test_a_target_given_per_release_is_patched_in_each(
    target: str, moved_package: Path, tmp_path: Path
) -> None:
    """One package, each release of its range: the patch waits for and patches that release's
    target (the loader check resolves it the same way, applies it once, reversibly), its
    signature checked against the one recorded from that release's wheel; suite and lint."""
    plugin = (moved_package / "src" / "acme" / "_plugin.py").read_text()
    assert f'"patch:make_arg_parser": {{\n        "0.32": "{MOVED["0.32"]}",' in plugin, plugin
    env = envs.ensure(target)
    ok = _suite_loaders_and_lint(env, moved_package, tmp_path / "site")
    assert ok == {"patch:make_arg_parser", "patch:early_cli_args", "lazy"}, ok
    if target != min(MOVED):
        return
    # The older release: `vllm serve`'s module imports that release's module (not the newest
    # release's, which the row names) before vLLM loads plugins, transformed all the same.
    script = (
        "import sys\n"
        "import vllm.entrypoints.cli.serve\n"
        f"module = sys.modules[{MOVED_MODULES[target]!r}]\n"
        "plugins = sys.modules.get('vllm.plugins')\n"
        "print('EARLY', type(module.__loader__).__name__, module.__loader__.source is not None,"
        " bool(getattr(plugins, 'plugins_loaded', False)))\n"
    )
    paths = envs.install_overlay(env, moved_package, tmp_path / "early")
    out = _run([str(env.python), "-c", script], tmp_path, paths)
    assert "EARLY _Transformed True False" in out, out[-4000:]


def test_a_real_vllm_change_fails_registration_in_one_line(tmp_path: Path) -> None:
    """A plugin generated for the oldest target, patching a method the newest target changed,
    installed into the newest vLLM: registration stops with one line naming the target, the
    change and the running vLLM; with on_mismatch: warn the patch is skipped with one WARNING."""
    by_version = sorted(TARGETS, key=lambda t: tuple(map(int, t.split("."))))
    old, new = by_version[0], by_version[-1]
    target, before, after = changed_method(old, new)
    patches = [target, {"target": target, "name": "lenient", "on_mismatch": "warn"}]
    env = envs.ensure(new)
    answers = tmp_path / "answers.yml"
    answers.write_text(json.dumps({"kinds": ["patch"], "patch_targets": patches[:1]}))
    strict = render_file(tmp_path / "strict", answers, vllm_target=old)
    answers.write_text(json.dumps({"kinds": ["patch"], "patch_targets": [patches[1]]}))
    lenient = render_file(tmp_path / "lenient", answers, vllm_target=old)
    module = target.partition(":")[0]
    script = (
        "import logging\n"
        "logging.basicConfig(format='%(levelname)s %(name)s %(message)s')\n"
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
        f"import {module}\n"
        "print('IMPORTED')\n"
    )
    for project, fails in ((strict, True), (lenient, False)):
        paths = envs.install_overlay(env, project, tmp_path / f"site-{project.name}")
        proc = subprocess.run(
            [str(env.python), "-c", script],
            cwd=tmp_path, env=dict(os.environ, **ENV, **paths), capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        out = proc.stdout + proc.stderr
        version = VLLM["targets"][new]["version"]
        expected = (
            f"patch {target.rpartition(':')[2] if fails else 'lenient'}: {target} changed: "
            f"{after}, recorded {before} for vLLM {VLLM['targets'][old]['version']}"
            f" (running vllm {version})"
        )
        lines = [line for line in out.splitlines() if expected in line]
        assert len(lines) == 1, out[-4000:]
        if fails:
            assert proc.returncode != 0 and "IMPORTED" not in out, out[-4000:]
            assert lines[0].startswith("RuntimeError: my_vllm_plugin patch "), lines[0]
        else:
            assert proc.returncode == 0 and "IMPORTED" in out, out[-4000:]
            assert lines[0].startswith("WARNING vllm.my_vllm_plugin._plugin "), lines[0]
            assert lines[0].endswith("; patch skipped"), lines[0]
        (tmp_path / f"{project.name}.line").write_text(lines[0] + "\n")


ROLES_SCRIPT = """
import importlib, importlib.util, json, multiprocessing, sys

# when: before_vllm: at Python start only the .pth's module is imported (not the plugin); the
# API server's module imports the gpt-oss reasoning parser module before vLLM loads plugins,
# transformed all the same.
seen = {"at start": sorted(m for m in sys.modules if m.startswith("acme_patches"))}
import vllm.entrypoints.openai.api_server
gptoss = sys.modules["vllm.reasoning.gptoss_reasoning_parser"]
seen["before plugins"] = [type(gptoss.__loader__).__name__, "vllm.plugins" in sys.modules and
    bool(getattr(sys.modules["vllm.plugins"], "plugins_loaded", False))]
from acme_patches import _plugin
for process in ["EngineCore", "VllmWorker-0", "MainProcess"]:
    multiprocessing.current_process().name = process
    importlib.reload(_plugin)  # the roles are decided while vLLM imports the plugin
    seen[process] = sorted(_plugin._roles())
# The worker-only patch in an engine core: its module imported after register() (vLLM building
# the worker in the engine core) applies it; a module loaded before register() is refused.
multiprocessing.current_process().name = "EngineCore"
step, args = importlib.reload(_plugin)._helper("patch:time_execute_model")
importlib.import_module("vllm.v1.worker.gpu_worker")
step(*args)
seen["worker module after"] = _plugin._ours(args[1], "time_execute_model") is not None
_plugin.unpatch("time_execute_model")
try:
    step, args = importlib.reload(_plugin)._helper("patch:time_execute_model")
    step(*args)
except RuntimeError as e:
    seen["worker module before"] = str(e)
# A module patch whose target is imported before the plugin loads fails in one line; a transform
# of a module without Python source (a compiled one) fails its import in one line.
multiprocessing.current_process().name = "MainProcess"
importlib.import_module("vllm.reasoning.deepseek_r1_reasoning_parser")
try:
    step, args = importlib.reload(_plugin)._helper("patch:own_deepseek_r1")
    step(*args)
except RuntimeError as e:
    seen["imported before"] = str(e)
hook = _plugin._ModuleHook("edit_olmo3", "_json", "acme_patches.patch_edit_olmo3", "transform")
spec = importlib.util.find_spec("_json")
compiled = type(sys)("_json")
compiled.__spec__ = spec
try:
    _plugin._Transformed(hook, spec.loader).exec_module(compiled)
except ImportError as e:
    seen["no source"] = str(e)
print("ROLES " + json.dumps(seen))
"""


@pytest.mark.parametrize("target", FULL_TARGETS)
def test_patch_roles_follow_the_process(target: str, tmp_path: Path) -> None:
    """The roles a patch's `processes` name, by the names vLLM gives its processes. An engine
    core is a worker for a worker-only patch only where vLLM imports the target's module after
    register() (it builds its worker in-process); a module loaded before is refused in one line,
    since vLLM tells a plugin nothing of the executor there."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "patches", PATCHES, vllm_target=target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    out = _run([str(env.python), "-c", ROLES_SCRIPT], tmp_path, paths)
    seen = json.loads(out.split("ROLES ", 1)[1].splitlines()[0])
    refused = seen.pop("worker module before")
    assert seen.pop("at start") == ["acme_patches_early"]
    assert seen.pop("before plugins") == ["_Transformed", False]
    imported, no_source = seen.pop("imported before"), seen.pop("no source")
    assert imported == (
        "acme_patches patch own_deepseek_r1: vllm.reasoning.deepseek_r1_reasoning_parser is "
        "imported already when the plugin loads, so how: replace_module cannot reach it: give "
        "the patch `when: before_vllm` (then acme_patches_early.pth, installed in site-packages, "
        "reaches it from Python start)"
    ), imported
    assert no_source.startswith("acme_patches patch edit_olmo3: _json has no Python source ("), (
        no_source
    )
    assert "\n" not in no_source and no_source.endswith("patch it with setattr"), no_source
    assert seen == {
        "EngineCore": ["engine core"],
        "VllmWorker-0": ["worker"],
        "MainProcess": ["front end"],
        "worker module after": True,
    }, seen
    assert refused.startswith("acme_patches patch time_execute_model: vllm.v1.worker.gpu_worker")
    assert f"vllm {VLLM['targets'][target]['version']}" in refused, refused


# Modules plugins patch most (engine core, scheduler, workers, runners, front end, configs, a
# model, a layer): every target recorded in them must be what the live vLLM has. A tuple is one
# module under its names across releases, the first the target has (the V1 model runner up to
# vLLM 0.33, Model Runner V2's from 0.34, which removed V1).
LIVE_MODULES = [
    "vllm.v1.core.sched.scheduler", "vllm.v1.engine.core", "vllm.v1.engine.input_processor",
    "vllm.v1.worker.gpu_worker",
    ("vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.gpu.model_runner"),
    "vllm.v1.worker.worker_base",
    "vllm.entrypoints.llm", "vllm.entrypoints.launchers.api_server.entry", "vllm.config.model",
    "vllm.config.vllm", "vllm.engine.arg_utils", "vllm.sampling_params",
    "vllm.model_executor.models.llama", "vllm.model_executor.layers.layernorm",
]  # fmt: skip
LIVE_SCRIPT = """
import importlib, json, sys
from acme_patches import _plugin

data, checked, wrong = json.loads(sys.argv[1]), 0, []
for module, symbols in data.items():
    live = importlib.import_module(module)
    for qualname, recorded in symbols.items():
        owner = live
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        if owner is None or attr not in vars(owner):
            wrong.append([module, qualname, recorded, "missing"])
            continue
        checked += 1
        found = _plugin._described(vars(owner)[attr])
        if recorded not in ("value", found) and not (recorded == "(...)" and found[0] == "("):
            wrong.append([module, qualname, recorded, found])
print("LIVE " + json.dumps({"checked": checked, "wrong": wrong}))
"""


@pytest.mark.parametrize("target", FULL_TARGETS)
def test_recorded_patch_targets_are_what_the_live_vllm_has(target: str, tmp_path: Path) -> None:
    """What extensions/patch/targets records (read from the wheel's source) against the live
    objects of the installed vLLM, through the plugin's own comparison: every function's
    parameters, every class, property and value of the modules plugins patch most."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "patches", PATCHES, vllm_target=target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    folder = ROOT / "extensions" / CATALOG["patch"]["data"] / target
    index = json.loads((folder / "index.json").read_text())["modules"]
    data = {}
    for names in LIVE_MODULES:
        module = next(m for m in (names if isinstance(names, tuple) else (names,)) if m in index)
        data[module] = json.loads((folder / f"{index[module]}.json").read_text())[module]
    out = _run([str(env.python), "-c", LIVE_SCRIPT, json.dumps(data)], tmp_path, paths)
    result = json.loads(out.split("LIVE ", 1)[1].splitlines()[0])
    assert result["checked"] >= 1500 and not result["wrong"], result
