"""Tier 2: generated packages inside real vLLM, through vLLM's own loaders, in fresh processes.

Environments are provisioned by tests/realvllm/envs.py (cached under ~/.cache, keyed by
version). Generated packages are installed into a throwaway `--target` folder put on
PYTHONPATH, so the cached environment is never modified and importlib.metadata still finds
their entry points.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import (
    CATALOG,
    NEW_MODEL_TYPE,
    PATCHES,
    ROOT,
    SEVERAL,
    TARGETS,
    VLLM,
    changed_method,
    instances,
    kinds_for,
    render_file,
    solo,
)
from realvllm import envs

pytestmark = pytest.mark.real_vllm
DRIVER = Path(__file__).parent / "realvllm" / "driver.py"
ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}


def _run(cmd: list[str], cwd: Path, extra: dict[str, str], timeout: int = 1200) -> str:
    env = dict(os.environ, **ENV, **extra)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-6000:]}"
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_all_kinds_package_passes_its_suite(target: str, rendered, tmp_path: Path) -> None:
    """A package with every kind of the target: its own suite and lint, as its author runs them."""
    env = envs.ensure(target)
    project = rendered(kinds=kinds_for(target), vllm_target=target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    # The serve smoke test is tier 3's (tests/test_serve.py runs it once, in the env that serves).
    cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not serve"]
    out = _run(cmd, project, paths)
    assert " passed" in out and " failed" not in out, out[-3000:]
    _run([str(env.bin / "ruff"), "check", "."], project, paths)
    _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)


@pytest.mark.parametrize("target", TARGETS)
def test_each_kind_alone(target: str, rendered, tmp_path: Path) -> None:
    """One package per kind, all installed side by side (plugins must coexist): each suite, and
    vLLM's loaders plus the idempotency checks of every package in one fresh process each."""
    env = envs.ensure(target)
    projects = [rendered(**solo(kind, target)) for kind in kinds_for(target)]
    paths = envs.install_overlay(env, projects, tmp_path / "site")
    # The in-process tests of every package in one session; the fresh-process ones via DRIVER.
    _run(
        [
            str(env.python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "-m",
            "not serve",
            "-k",
            "not fresh_vllm_process",
            *[str(p / "tests") for p in projects],
        ],
        tmp_path,
        paths,
    )
    # The two fresh processes side by side (each mostly imports vLLM, on one core).
    with ThreadPoolExecutor(2) as pool:
        outs = pool.map(
            lambda group: _run(
                [str(env.python), str(DRIVER), group, *map(str, projects)], tmp_path, paths
            ),
            ("loaders", "idempotency"),
        )
        for out in outs:
            result = json.loads(out_line(out))
            failed = result["failed"]
            assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())
    for project in projects:
        _run([str(env.bin / "ruff"), "check", "."], project, paths)
        _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)


# What examples/several.yml promises (issue 13): at least this many instances of these kinds.
SEVERAL_AT_LEAST = {
    "model": 3,
    "tool_parser": 2,
    "reasoning_parser": 2,
    "kv_connector": 2,
    "custom_op": 2,
    "stat_logger": 2,
    "io_processor": 2,
    "logits_processor": 2,
    "endpoint": 2,
}


@pytest.mark.parametrize("target", TARGETS)
def test_several_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """examples/several.yml through `copier copy --data-file`: every instance checked by vLLM's
    own loaders in fresh processes (one row each), the switches and settings, each instance's
    own test, and lint."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "several", SEVERAL, vllm_target=target)
    counts: dict[str, int] = {}
    for key in instances(project):
        counts[key.partition(":")[0]] = counts.get(key.partition(":")[0], 0) + 1
    assert all(counts.get(k, 0) >= n for k, n in SEVERAL_AT_LEAST.items()), counts
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    expected = {key for key in instances(project)} | {"lazy"}
    assert ok == expected, ok ^ expected


def _suite_loaders_and_lint(env: envs.VllmEnv, project: Path, site: Path) -> set[str]:
    """The project installed into `env`: its suite passes (but the serve), its loader checks in
    a fresh process fail nowhere, and ruff is clean; the loader checks that passed."""
    paths = envs.install_overlay(env, project, site)
    cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not serve"]
    out = _run(cmd, project, paths)
    assert " passed" in out and " failed" not in out, out[-3000:]
    loaders = _run([str(env.python), str(project / "tests" / "vllm_checks.py"), "loaders"],
                   project, paths)  # fmt: skip
    result = json.loads(out_line(loaders))
    assert not result["failed"], result["failed"]
    _run([str(env.bin / "ruff"), "check", "."], project, paths)
    _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)
    return set(result["ok"])


# The tests each replaced class's generated test file holds when the catalog has its sample.
SAMPLE_TESTS = {
    "custom_op": ["test_subclasses_vllms_op", "test_forward_native_matches_vllm"],
    "pluggable_layer": ["test_subclasses_vllms_layer", "test_forward_matches_vllm"],
}


@pytest.mark.parametrize("kind", list(SAMPLE_TESTS))
@pytest.mark.parametrize("target", TARGETS)
def test_every_sample_asserts_in_real_vllm(
    kind: str, target: str, rendered, tmp_path: Path
) -> None:
    """Issue 19: one plugin replacing every op (layer) the catalog has a CPU sample for. Each
    generated test builds vLLM's class and the plugin's and compares their outputs: every one
    runs and passes; only custom ops' forward_cpu skips, off vLLM's CPU build (or a build
    without the kernels it calls), and none is generated where vLLM's own is no reference."""
    env = envs.ensure(target)
    builtins = CATALOG[kind]["builtins"][target]
    samples = CATALOG[kind]["samples"]
    selectable = set(builtins["names"]) - set(builtins.get("duplicates") or {})
    names = sorted(n for n in samples if n in selectable)
    project = rendered(
        kinds=[kind], vllm_target=target, project_name=f"All {kind}", **{f"{kind}_names": names}
    )
    paths = envs.install_overlay(env, project, tmp_path / "site")
    files = sorted((project / "tests").glob(f"test_{kind}_*.py"))
    assert len(files) == len(names), (len(files), len(names))
    report = tmp_path / "report.xml"
    cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
    _run([*cmd, *map(str, files)], project, paths)
    got: dict[tuple[str, str], str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").rpartition(".")[2].removeprefix("test_")
        got[module, case.get("name", "")] = (
            "skipped" if case.find("skipped") is not None else "passed"
        )
    cpu = "passed" if VLLM["targets"][target]["cpu_build"] else "skipped"
    expected = {}
    for key, module in instances(project).items():
        sample = samples[key.partition(":")[2]]
        expected |= {(module, test): "passed" for test in SAMPLE_TESTS[kind]}
        forward_cpu = (module, "test_forward_cpu_matches_vllm_native")
        if kind == "custom_op" and not sample.get("no_cpu"):
            # Where forward_cpu calls kernels of some CPU builds only, this build decides.
            kernels = sample.get("cpu_kernels") and forward_cpu in got
            expected[forward_cpu] = got[forward_cpu] if kernels else cpu
    assert len({m for m, _ in got}) == len(names), sorted({m for m, _ in got})
    assert got == expected, {
        k: (got.get(k), expected.get(k))
        for k in got.keys() | expected.keys()
        if got.get(k) != expected.get(k)
    }
    _run([str(env.bin / "ruff"), "check", "."], project, paths)
    _run([str(env.bin / "ruff"), "format", "--check", "."], project, paths)


def out_line(out: str) -> str:
    return out.split("VLLM_CHECKS ", 1)[1].splitlines()[0]


# What examples/patches.yml promises (issue 15): these patches, each in exactly these processes.
PATCHES_PROMISED = {
    "patch:count_schedule": ["engine core"],
    "patch:wrap_build_app": ["front end"],
    "patch:check_inputs": ["front end"],
    "patch:time_execute_model": ["worker"],
}


@pytest.mark.parametrize("target", TARGETS)
def test_patches_example_passes_its_suite(target: str, tmp_path: Path) -> None:
    """examples/patches.yml: every target exists in this vLLM as recorded, each patch applies
    exactly once after 3 register() calls and a re-import, is reversible, and the instance's own
    test passes; lint."""
    import yaml

    env = envs.ensure(target)
    project = render_file(tmp_path / "patches", PATCHES, vllm_target=target)
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    named = {f"patch:{p['name']}": p["processes"] for p in answers["patch_targets"]}
    assert named == PATCHES_PROMISED, named
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == {*PATCHES_PROMISED, "lazy"}, ok


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
import importlib, json, multiprocessing
from vllm.v1.executor.multiproc_executor import MultiprocExecutor
from vllm.v1.executor.uniproc_executor import UniProcExecutor
from acme_patches import _plugin


def engine_core_init(executor_class):  # as vLLM's EngineCore.__init__ holds it
    importlib.reload(_plugin)  # the roles are decided while vLLM imports the plugin
    return sorted(_plugin._roles())


seen = {}
for process, executor in [("EngineCore", UniProcExecutor), ("EngineCore", MultiprocExecutor),
                          ("VllmWorker-0", None), ("MainProcess", None)]:
    multiprocessing.current_process().name = process
    seen[f"{process} {getattr(executor, '__name__', '')}".strip()] = engine_core_init(executor)
print("ROLES " + json.dumps(seen))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_patch_roles_follow_the_process_and_its_executor(target: str, tmp_path: Path) -> None:
    """The roles a patch's `processes` name, decided as vLLM loads the plugin, with vLLM's real
    executor classes: an engine core that runs its worker itself (the `uni` executor, vLLM's
    default on one GPU, which CPU serves never use) is a worker too; one with worker processes
    is not; a worker process is a worker; the serving process is the front end."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "patches", PATCHES, vllm_target=target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    out = _run([str(env.python), "-c", ROLES_SCRIPT], tmp_path, paths)
    seen = json.loads(out.split("ROLES ", 1)[1].splitlines()[0])
    assert seen == {
        "EngineCore UniProcExecutor": ["engine core", "worker"],
        "EngineCore MultiprocExecutor": ["engine core"],
        "VllmWorker-0": ["worker"],
        "MainProcess": ["front end"],
    }, seen


# What examples/new-model-type.yml promises (issue 14): one architecture with an alias, and
# its own model type, whose configuration is a step of its own.
NEW_TYPE_STEPS = {"model:Spark2_5ForCausalLM", "model:Spark2_5ForCausalLM:config"}
NEW_TYPE_SCRIPT = """
import json, sys
from pathlib import Path
from vllm.plugins import load_general_plugins
from vllm.transformers_utils.config import get_config

checkpoint = Path(sys.argv[1])
load_general_plugins()
try:
    config = get_config(checkpoint, trust_remote_code=False)
except Exception as e:
    print("CONFIG " + json.dumps({"error": str(e).splitlines()[0]}))
else:
    print("CONFIG " + json.dumps({
        "class": f"{type(config).__module__}:{type(config).__name__}",
        "model_type": config.model_type,
        "model_code_imported": [m for m in sys.modules if m.startswith("acme_spark.model_")
                                and not m.endswith("_config")],
    }))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_new_model_type_example_reads_its_checkpoints_through_vllm(
    target: str, tmp_path: Path
) -> None:
    """examples/new-model-type.yml: its suite, loader checks (the architecture, its alias and
    the configuration, each lazily and idempotently) and lint pass; vLLM's own get_config reads
    a config.json of the new model type as the plugin's class, without importing model code;
    with the plugin not loaded, vLLM refuses that checkpoint naming the model type."""
    env = envs.ensure(target)
    project = render_file(tmp_path / "spark", NEW_MODEL_TYPE, vllm_target=target)
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    assert ok == {*NEW_TYPE_STEPS, "lazy"}, ok
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    config = {"architectures": ["Spark2_5LMHeadModel"], "model_type": "acme_spark2_5",
              "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1,
              "vocab_size": 256, "intermediate_size": 128}  # fmt: skip
    (checkpoint / "config.json").write_text(json.dumps(config))
    paths = envs.install_overlay(env, project, tmp_path / "site")
    script = [str(env.python), "-c", NEW_TYPE_SCRIPT, str(checkpoint)]
    read = json.loads(_run(script, tmp_path, paths).split("CONFIG ", 1)[1].splitlines()[0])
    assert read == {
        "class": "acme_spark.model_spark2_5_for_causal_lm_config:Spark2_5Config",
        "model_type": "acme_spark2_5",
        "model_code_imported": [],
    }, read
    alone = _run(script, tmp_path, {**paths, "VLLM_PLUGINS": ""})
    error = json.loads(alone.split("CONFIG ", 1)[1].splitlines()[0])["error"]
    assert "acme_spark2_5" in error, error


REPLACE_SCRIPT = """
import logging, json
from vllm.plugins import load_general_plugins
from vllm import ModelRegistry
from transformers import AutoConfig

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("vllm.acme_replace").addHandler(handler)
load_general_plugins()
cls = ModelRegistry.models["LlamaForCausalLM"].load_model_cls()
config = AutoConfig.for_model("mistral")
print("REPLACED " + json.dumps({
    "LlamaForCausalLM": f"{cls.__module__}:{cls.__name__}",
    "mistral": f"{type(config).__module__}:{type(config).__name__}",
    "warnings": [r for r in records if "replaces" in r],
}))
"""


@pytest.mark.parametrize("target", TARGETS)
def test_replace_serves_the_plugin_class_for_a_builtin_name(target: str, tmp_path: Path) -> None:
    """`replace: true` on purpose: vLLM's own LlamaForCausalLM and transformers' mistral model
    type now resolve, through vLLM's registry and AutoConfig, to the plugin's classes; each
    replacement logs one WARNING naming what it replaced and the package; the suite passes."""
    env = envs.ensure(target)
    answers = {
        "project_name": "Acme Replace",
        "kinds": ["model"],
        "model_architectures": [
            {"name": "LlamaForCausalLM", "replace": True},
            {"name": "AcmeMistralForCausalLM", "base": "MistralForCausalLM",
             "model_type": "mistral", "replace": True},
        ],
    }  # fmt: skip
    data = tmp_path / "replace.yml"
    data.write_text(json.dumps(answers))
    project = render_file(tmp_path / "replace", data, vllm_target=target)
    ok = _suite_loaders_and_lint(env, project, tmp_path / "site")
    expected = {"model:LlamaForCausalLM", "model:AcmeMistralForCausalLM"}
    assert ok == {*expected, "model:AcmeMistralForCausalLM:config", "lazy"}, ok
    paths = envs.install_overlay(env, project, tmp_path / "site")
    out = _run([str(env.python), "-c", REPLACE_SCRIPT], tmp_path, paths)
    seen = json.loads(out.split("REPLACED ", 1)[1].splitlines()[0])
    builtin = CATALOG["model"]["builtins"][target]["text_generation"]["LlamaForCausalLM"]
    assert seen == {
        "LlamaForCausalLM": "acme_replace.model_llama_for_causal_lm:LlamaForCausalLM",
        "mistral": "acme_replace.model_acme_mistral_for_causal_lm_config:AcmeMistralConfig",
        "warnings": [
            "acme_replace replaces vLLM's architecture LlamaForCausalLM"
            f" ({builtin}) with acme_replace.model_llama_for_causal_lm:LlamaForCausalLM",
            "acme_replace replaces the configuration of model type mistral (transformers.models"
            ".mistral.configuration_mistral.MistralConfig) with"
            " acme_replace.model_acme_mistral_for_causal_lm_config:AcmeMistralConfig",
        ],
    }, seen


# Modules plugins patch most (engine core, scheduler, workers, runners, front end, configs, a
# model, a layer): every target recorded in them must be what the live vLLM has.
LIVE_MODULES = [
    "vllm.v1.core.sched.scheduler", "vllm.v1.engine.core", "vllm.v1.engine.input_processor",
    "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.worker_base",
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


@pytest.mark.parametrize("target", TARGETS)
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
    for module in LIVE_MODULES:
        data[module] = json.loads((folder / f"{index[module]}.json").read_text())[module]
    out = _run([str(env.python), "-c", LIVE_SCRIPT, json.dumps(data)], tmp_path, paths)
    result = json.loads(out.split("LIVE ", 1)[1].splitlines()[0])
    assert result["checked"] >= 1500 and not result["wrong"], result
