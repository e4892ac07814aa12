"""The kit's smoke serve (issue 34): every kind's serve check is in pytest_vllm_plugin.smoke with
the arguments a generated plugin's row passes, and serve.Smoke (what a generated
tests/test_smoke_serve.py calls) plans, runs and skips the checks, here without vLLM: a
stand-in for the serves hands out a fake server."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import CATALOG, ROOT
from realvllm import envs

SMOKE = ROOT / "kit" / "src" / "pytest_vllm_plugin" / "smoke.py"
# What a kind of one instance passes (template/tests/test_smoke_serve.py.jinja): its module (and
# class); every other kind's check takes its loader-check row (`instances.args`): smoke.rows().
ONE = {"platform": ["module"], "scheduler": ["module", "class_name"]}
ONE["worker_extension"] = ONE["scheduler"]


def test_every_kind_has_a_serve_check_taking_its_rows_arguments() -> None:
    tree = ast.parse(SMOKE.read_text())
    checks = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for kind, entry in CATALOG.items():
        if kind == "general":  # checked by serve.check_general_plugin
            continue
        assert kind in checks, f"no pytest_vllm_plugin.smoke.{kind}"
        params = [a.arg for a in checks[kind].args.args]
        args = entry["instances"]["args"] if "instances" in entry else ONE[kind]
        assert [a.arg for a in checks[kind].args.kwonlyargs] == ["server"], (kind, params)
        assert len(params) == len(args), (kind, params, args)


PLAN = """\
SERVES = {
    "main": {"checkpoint": "x", "instances": ["a:one", "b:two", "c:gpu"], "output": True},
    "alone": {"checkpoint": "x", "instances": ["gone:old"]},
    "gpu": {"checkpoint": "x", "instances": ["c:gpu"]},
}
NOT_SERVED = {"d:far": "needs a cluster"}
EXPECT = {"b:two": lambda server: server.calls.append("expect b:two")}
"""
TEST = """\
from functools import partial
from pathlib import Path

import pytest
from pytest_vllm_plugin import serve

LOG = Path(__file__).with_name("calls.txt")


def check(what, server):
    server.calls.append(what)


DEFAULTS = {
    "a:one": {"checkpoint": {"tiny": {}}},
    "b:two": {"checkpoint": {"tiny": {}}},
    "c:gpu": {"checkpoint": {"tiny": {}}},
    "d:far": {"not_served": "default reason"},
    "e:new": {"checkpoint": {"tiny": {}}},
}
CHECKS = {"a:one": partial(check, "check a:one"), "c:gpu": partial(check, "check c:gpu")}
SMOKE = serve.Smoke(
    Path(__file__).parent / "serve_plan.py",
    distribution="acme",
    defaults=DEFAULTS,
    checks=CHECKS,
    entry_points=["acme"],
    trace_env="ACME_TRACE",
    not_on_cpu={"c:gpu": "needs CUDA"},
)
SMOKE.checks["output"] = partial(check, "output")
SMOKE.checks["general_plugin"] = partial(check, "general_plugin")


class Calls:
    def __init__(self, name):
        self.name = name

    def append(self, item):
        with LOG.open("a") as f:
            f.write(f"{self.name} {item}\\n")


class Server:
    def __init__(self, name):
        self.calls = Calls(name)


class Serves:
    target = "cpu"

    def get(self, name):
        return Server(name)


@pytest.fixture(scope="module")
def serves():
    return Serves()


@pytest.mark.parametrize(("name", "check"), SMOKE.runs())
def test_serve(name, check, serves):
    SMOKE.run(name, check, serves)


@pytest.mark.parametrize("instance", sorted(SMOKE.plan.not_served))
def test_not_served(instance):
    SMOKE.not_served(instance)
"""


def test_smoke_plans_runs_and_skips_the_checks(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "serve_plan.py").write_text(PLAN)
    (tests / "test_smoke_serve.py").write_text(TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA",
         "tests/test_smoke_serve.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(envs.kit_site()), "COLUMNS": "200"},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    passed = set(re.findall(r"^PASSED \S+::test_serve\[(.+)\]$", out, re.M))
    # Each serve's own checks, then its instances with a check or an expectation, or unknown;
    # the instance the plan does not mention (e:new) is served on its own, its default flags.
    assert passed == {
        "main-output", "main-general_plugin", "main-a:one", "main-b:two",
        "alone-general_plugin", "e:new-general_plugin",
    }, out  # fmt: skip
    assert "gone:old is not an instance of this plugin" in out, out
    assert "c:gpu cannot serve on CPU: needs CUDA" in out, out
    assert "serve 'gpu' exists for kinds that cannot serve on CPU" in out, out
    assert "d:far: needs a cluster" in out, out  # the plan's reason, not the default's
    calls = (tmp_path / "tests" / "calls.txt").read_text().splitlines()
    assert calls == [
        "main output", "main general_plugin", "main check a:one", "main expect b:two",
        "alone general_plugin", "e:new general_plugin",
    ], calls  # fmt: skip
