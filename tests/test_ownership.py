"""Issue 20: the template's files check vLLM's contract, never the example's behaviour.

Every author replaces the example code on day one. Here every example module of a plugin with
every kind is replaced by a different but valid implementation (tests/ownership/
replacements.py), with the author's own tests and serve plan; `copier update` to the same
release keeps all of them byte for byte, and the template-owned tests (vLLM's loaders in fresh
processes, idempotency, laziness, switches) still pass in real vLLM. The examples' own tests
fail on the replaced code: the replacements do behave otherwise. Tier 3 serves the replaced
package through the author's plan (tests/test_serve.py).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from string import Template
from xml.etree import ElementTree

import pytest
from conftest import CATALOG, OWNERSHIP_TARGETS, instances, kinds_for
from ownership.replacements import HEADER, MODULES, SERVE_PLAN, TEST
from realvllm import envs
from update import harness

pytestmark = pytest.mark.real_vllm
# What the author's plan does with each kind (kind.yml `tests: ownership:`): a serve of its own
# (`serve`: pooling, offload) apart from the generative one, or none (`not_served`: why).
OWNERSHIP = {
    kind: (entry.get("tests") or {}).get("ownership") or {} for kind, entry in CATALOG.items()
}
POOLING = {kind for kind, o in OWNERSHIP.items() if o.get("serve") == "pooling"}
OFFLOAD = {kind for kind, o in OWNERSHIP.items() if o.get("serve") == "offload"}
NOT_SERVED = {kind: o["not_served"] for kind, o in OWNERSHIP.items() if "not_served" in o}


def replace_examples(project: Path) -> Path:
    """Every example module of `project` replaced by the author's (tests/ownership/
    replacements.py), each example test by the author's, and tests/serve_plan.py by the
    author's plan; returns a folder holding the examples' own tests (and the conftest they
    use), to run against the replaced code."""
    package = str(harness.answers(project)["package_name"])
    src, tests = project / "src" / package, project / "tests"
    originals = project.parent / f"{project.name}-example-tests"
    originals.mkdir()
    shutil.copy(tests / "conftest.py", originals)
    platform = (src / "platform.py").read_text() if (src / "platform.py").exists() else ""
    prefix = re.search(r'PLATFORM = f"\{__name__\}\.(\w+)Platform"', platform)
    # The class vLLM is given for an instance: the one the glue's STEPS, the template's checks
    # (tests/instances.json: an entry-point instance's) or the entry points name.
    named = "".join(
        p.read_text()
        for p in (src / "_plugin.py", tests / "vllm_checks.py", tests / "instances.json",
                  project / "pyproject.toml")
        if p.exists()
    )  # fmt: skip
    keys = instances(project)
    for key, module in keys.items():
        kind, _, name = key.partition(":")
        original = (src / f"{module}.py").read_text()
        classes = re.findall(r"^class (\w+)", original, re.M)
        cls = next((c for c in classes if f'"{c}"' in named or f":{c}" in named), "")
        # Where a kind has several vLLM interfaces (`<kind>/<variant>` in MODULES), the author's
        # module is written for the one whose vLLM modules the example imports.
        variants = [v for k, v in MODULES.items() if k == kind or k.startswith(f"{kind}/")]
        what, body = next(
            (v for v in variants if _vllm_imports(v[1]) <= _vllm_imports(original)), variants[0]
        )
        fields = {
            "cls": cls,
            "name": name,
            "ep": f"{package}_{module}",
            "pkg": package,
            "PKG": package.upper(),
            "P": prefix.group(1) if prefix else "",
            "module": module,
        }
        (src / f"{module}.py").write_text(
            HEADER.format(what=what) + Template(body).substitute(fields)
        )
        shutil.move(tests / f"test_{module}.py", originals / f"test_{module}.py")
        (tests / f"test_{module}.py").write_text(Template(TEST).substitute(fields))
    (tests / "serve_plan.py").write_text(_plan(project, keys))
    return originals


def _vllm_imports(text: str) -> set[str]:
    return set(re.findall(r"^from (vllm[\w.]*) import", text, re.M))


def _plan(project: Path, keys: dict[str, str]) -> str:
    """The author's serve plan for the replaced package: the generated plan's flags, the
    replaced platform's own switch, the author's grouping and NOT_SERVED."""
    generated = _literals(project / "tests" / "serve_plan.py", "ARGS", "ENV")
    package = str(harness.answers(project)["package_name"])
    kind_of = {key: key.partition(":")[0] for key in keys}
    not_served = {k: NOT_SERVED[kind] for k, kind in kind_of.items() if kind in NOT_SERVED}
    env = {k: v for k, v in generated["ENV"].items() if kind_of.get(k) != "platform"}
    if "platform" in kind_of.values():
        env["platform"] = {f"{package.upper()}_USE_CPU": "1"}
    endpoint = next(k for k in keys if k.startswith("endpoint:"))
    fields = {
        "generate": [k for k, kind in kind_of.items()
                     if kind not in POOLING | OFFLOAD | set(NOT_SERVED)],
        "pooling": [k for k, kind in kind_of.items() if kind in POOLING],
        "offload": [k for k, kind in kind_of.items() if kind in OFFLOAD],
        "args": {k: v for k, v in generated["ARGS"].items() if k not in not_served},
        "env": env,
        "not_served": not_served,
        "endpoint": endpoint,
        "route": endpoint.partition(":")[2],
    }  # fmt: skip
    return Template(SERVE_PLAN).substitute({k: repr(v) for k, v in fields.items()})


def _literals(path: Path, *names: str) -> dict[str, object]:
    found = {}
    for node in ast.parse(path.read_text()).body:
        target = getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id in names and node.value is not None:
            found[target.id] = ast.literal_eval(node.value)
    return found


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Template]:
    yield harness.snapshot(tmp_path_factory.mktemp("template") / "vllm-plugin-template")


def _junit(report: Path) -> dict[str, str]:
    """{file::test: passed | failed | skipped} of a pytest junit report."""
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        state = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                state = "skipped" if tag == "skipped" else "failed"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = state
    return outcomes


@pytest.mark.parametrize("target", OWNERSHIP_TARGETS)
def test_replaced_examples_keep_template_tests_green_through_update(
    target: str, template: harness.Template, tmp_path: Path
) -> None:
    """Every kind's example replaced, then `copier update` to the same release: the author's
    modules, tests and serve plan are kept byte for byte, and every template-owned test passes
    in real vLLM (the loaders of every instance in fresh processes, idempotency, laziness,
    switches); the examples' own tests fail on the replaced code."""
    project = tmp_path / "plugin"
    harness.copy(template, project, "HEAD", kinds=kinds_for(target), vllm_target=target)
    originals = replace_examples(project)
    harness.commit_all(project, "the author's code")
    before = harness.author_owned(project)
    # + switches.py, steps.py, the serve plan, README.md and the package's __init__.py
    assert len(before) == 2 * len(instances(project)) + 5, sorted(before)

    out = harness.update(project, "HEAD")

    assert not harness.conflict_markers(project), out
    assert harness.author_owned(project) == before, "the update changed the author's files"
    env = envs.ensure(target)
    paths = envs.install_overlay(env, project, tmp_path / "site")
    run_env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", **paths}
    pytest_cmd = [str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [*pytest_cmd, "-m", "not serve", f"--junitxml={tmp_path / 'ours.xml'}"],
        cwd=project, env=run_env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    got = _junit(tmp_path / "ours.xml")
    template_owned = {t.partition("::")[2]: s for t, s in got.items() if "vllm_checks::" in t}
    fresh = ["test_in_fresh_vllm_process[loaders]", "test_in_fresh_vllm_process[idempotency]"]
    assert {"test_entry_points_resolve", *fresh} <= set(template_owned), got
    assert any(t.startswith("test_switches_in_fresh_vllm_process") for t in template_owned), got
    assert set(template_owned.values()) == {"passed"}, template_owned
    # The examples' own tests, against the replaced code: they test the examples' behaviour
    # (a collection error, a name the replacement does not have, counts as a failure).
    modules = instances(project)
    expected = {f"test_{modules[k]}" for k in modules if k.partition(":")[0] in FAILING_EXAMPLES}
    examples = [originals / f"{name}.py" for name in sorted(expected)]
    subprocess.run(
        [*pytest_cmd, "--continue-on-collection-errors", *map(str, examples),
         f"--junitxml={tmp_path / 'examples.xml'}"],
        cwd=originals, env=run_env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    failed = {
        t.split("::")[0].rpartition(".")[2] or t.partition("::")[2]
        for t, state in _junit(tmp_path / "examples.xml").items()
        if state == "failed"
    }
    assert expected <= failed, (expected - failed, failed)


# Kinds whose example tests fail on the replaced module (each tests what the example does):
# kind.yml `tests: ownership: example_tests_fail`.
FAILING_EXAMPLES = {kind for kind, o in OWNERSHIP.items() if o.get("example_tests_fail")}
