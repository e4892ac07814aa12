"""The template's own test suite, in tiers (see README.md, "Testing the template").

tier 1 (render):     every kind alone and all together, every target: files parse, lint clean,
                     entry points and formats match the catalog, bad answers refused.
tier 2 (real vLLM):  generated packages installed next to real vLLM (every target of
                     extensions/vllm.yml, its `wheel`), vLLM's own loaders in fresh processes,
                     the generated suites.
tier 3 (serve):      a real `vllm serve` on CPU with generated plugins installed.
tier 4 (update):     `copier update` across releases, targets and kinds.
peer:                vLLM's own tests/plugins_tests against vLLM's dummy packages and against
                     generated packages in their place (tests/test_peer.py, docs/peer-tier.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import copier
import pytest
import scheduling

ROOT = Path(__file__).resolve().parent.parent


def load_catalog() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(vllm.yml, {kind: catalog entry}): the same data the templates read."""
    from tools.catalog import build

    data = build()
    return data["vllm"], data["catalog"]


VLLM, CATALOG = load_catalog()
TARGETS = list(VLLM["targets"])
# The newest target with a CPU build (catalog: `cpu_build`): the vLLM that serves on CPU.
SERVING_TARGET = max(
    (t for t, spec in VLLM["targets"].items() if spec["cpu_build"]),
    key=lambda t: tuple(map(int, t.split("."))),
)


# Which tiers run in which target (README, "Testing the template"): what keeps a warm `.ci/run`
# under 30 minutes on 2 cores with five targets. Every target runs the render tier, the
# second-registration probe and the range example (in its releases). The package of all its kinds
# and the peer tier (its tests that start an engine in the newest CPU build only,
# tests/test_peer.py) run in the newest target and the newest CPU build (FULL_TARGETS). The example
# suites (several, models, patches, replace) run at loader level in the target the examples name
# (latest, as users copy them) and serve in the newest CPU build; the samples run in the newest CPU
# build (where forward_cpu runs too). Each kind alone (24 packages side by side) and the ownership
# proof run in the newest target; per-target facts (recorded patch targets, executor roles) in the
# newest target and the newest CPU build (FULL_TARGETS); the serve of every kind in the newest and
# the oldest CPU build. VPT_ALL_TARGETS=1 runs the example suites, the samples, each kind alone, the
# package of all kinds, the ownership proof, the range example's serve, the serve of every kind and
# the peer tier (its engine tests included) in every target.
ALL_TARGETS = os.environ.get("VPT_ALL_TARGETS") == "1"
FULL_TARGETS = [t for t in reversed(VLLM["releases"]) if t in {VLLM["latest"], SERVING_TARGET}]
EACH_KIND_TARGETS = TARGETS if ALL_TARGETS else [VLLM["latest"]]
ALL_KINDS_TARGETS = TARGETS if ALL_TARGETS else FULL_TARGETS
PEER_TARGETS = TARGETS if ALL_TARGETS else FULL_TARGETS
# Where the peer tier runs vLLM's tests that start an engine (tests/test_peer.py).
PEER_ENGINE_TARGETS = [
    t for t in TARGETS if VLLM["targets"][t]["cpu_build"] and (ALL_TARGETS or t == SERVING_TARGET)
]
scheduling.ENGINE_ONLY_FOR["test_peer.py"] = set(PEER_ENGINE_TARGETS)
EXAMPLE_TARGETS = TARGETS if ALL_TARGETS else [VLLM["latest"]]
SAMPLE_TARGETS = TARGETS if ALL_TARGETS else [SERVING_TARGET]
# The ownership proof (tests/test_ownership.py): the newest target.
OWNERSHIP_TARGETS = TARGETS if ALL_TARGETS else [VLLM["latest"]]
# The serve of every kind in a CPU build older than SERVING_TARGET (tests/test_serve.py): the
# oldest CPU build; the releases between it and SERVING_TARGET run the range example there.
OLDER_CPU_TARGETS = [
    t for t in VLLM["releases"] if VLLM["targets"][t]["cpu_build"] and t != SERVING_TARGET
][: None if ALL_TARGETS else 1]


def kinds_for(target: str) -> list[str]:
    return [k for k in CATALOG if target in CATALOG[k]["targets"]]


def solo(kind: str, target: str) -> dict[str, Any]:
    """The answers of a one-kind plugin, named after its kind so that one-kind plugins install
    side by side (tier 2) and the tiers share their renders."""
    return {
        "kinds": [kind],
        "vllm_target": target,
        "project_name": f"Solo {kind.replace('_', ' ')}",
    }


def instances(project: Path) -> dict[str, str]:
    """{instance key: module} of a generated project, from its answers file (`_instances`):
    key is the kind, or kind:name for a kind answered by a list."""
    import yaml

    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    return dict(answers["_instances"])


SEVERAL = ROOT / "examples" / "several.yml"
PATCHES = ROOT / "examples" / "patches.yml"
NEW_MODEL_TYPE = ROOT / "examples" / "new-model-type.yml"
FAMILIES = ROOT / "examples" / "model-families.yml"
REPLACE_BUILTINS = ROOT / "examples" / "replace-builtins.yml"
RANGE = ROOT / "examples" / "range.yml"
CPU_PLATFORM = ROOT / "examples" / "cpu-platform.yml"


def range_of(answers: Path) -> list[str]:
    """The releases an answers file's plugin supports (vllm_oldest to vllm_target), oldest
    first, as copier.yml's `vllm_range` computes them."""
    import yaml

    data = yaml.safe_load(answers.read_text())
    releases = VLLM["releases"]
    newest = (
        VLLM["latest"] if data.get("vllm_target", "latest") == "latest" else data["vllm_target"]
    )
    oldest = data.get("vllm_oldest") or newest
    return releases[releases.index(oldest) : releases.index(newest) + 1]


def changed_method(old: str, new: str) -> tuple[str, str, str]:
    """(target, old signature, new signature) of a method whose parameters differ between two
    targets' recorded data: the scheduler's if it has one, else the first in module order."""
    data = {}
    for t in (old, new):
        folder = ROOT / "extensions" / CATALOG["patch"]["data"] / t
        merged: dict[str, dict[str, str]] = {}
        for shard in sorted(folder.glob("*.json")):
            if shard.name != "index.json":
                merged.update(json.loads(shard.read_text()))
        data[t] = merged
    changed = [
        (f"{module}:{q}", data[old][module][q], sig)
        for module, symbols in data[new].items()
        for q, sig in symbols.items()
        if module in data[old] and q in data[old][module] and "." in q
        and sig.startswith("(") and data[old][module][q].startswith("(")
        and data[old][module][q] != sig
    ]  # fmt: skip
    assert changed, f"no method changed its parameters between {old} and {new}"
    return next((c for c in changed if "core.sched.scheduler:" in c[0]), changed[0])


def quick_start() -> list[str]:
    """The commands of README.md's Quick start as printed, in order: its ```bash blocks, a
    continued line joined, comment lines dropped (a command keeps its trailing comment)."""
    section = (ROOT / "README.md").read_text().split("\n## Quick start", 1)[1]
    section = section.split("\n### ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(" ".join(line.split()))
    return commands


def single_target(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with `vllm_oldest: ""` unless it names one: a render of the tests is the plugin of
    its `vllm_target` alone, as before copier.yml's default range (a target without a CPU build
    reaches down to one). The tests of that default give no `vllm_oldest` to copier directly."""
    return {"vllm_oldest": "", **data}


def render_file(dst: Path, answers: Path, **data: str) -> Path:
    """`copier copy --defaults --data-file ANSWERS --data K=V ...` of this working tree, through
    the CLI, as the example's users run it (with `vllm_oldest=""` unless the file or `data`
    gives one: single_target)."""
    import shutil
    import subprocess
    import sys

    import yaml

    exe = shutil.which("copier") or str(Path(sys.executable).with_name("copier"))
    if "vllm_oldest" not in (yaml.safe_load(answers.read_text()) or {}):
        data = single_target(data)
    args = [a for k, v in data.items() for a in ("--data", f"{k}={v}")]
    cmd = [exe, "copy", "--defaults", "--quiet", "--vcs-ref", "HEAD", "--data-file", str(answers)]
    proc = subprocess.run(
        [*cmd, *args, str(ROOT), str(dst)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dst


def render(dst: Path, **data: Any) -> Path:
    """`copier copy --defaults --data ...` of this working tree (uncommitted changes included),
    the target alone unless `data` gives a `vllm_oldest` (single_target)."""
    copier.run_copy(
        str(ROOT),
        dst,
        data=single_target(data),
        defaults=True,
        unsafe=False,
        vcs_ref="HEAD",
        quiet=True,
    )
    return dst


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Path]]:
    """Render once per distinct answer set in the session; tiers share the result."""
    # Shared by the session's xdist workers (their base temp folders sit side by side): a
    # render another worker made is used as it is, never made twice.
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "rendered"
    shared.mkdir(exist_ok=True)

    def get(**data: Any) -> Path:
        key = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
        done = shared / key
        with open(shared / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                shutil.rmtree(shared / f"{key}.tmp", ignore_errors=True)
                render(shared / f"{key}.tmp", **data).rename(done)
        return done

    yield get


def pytest_configure(config: pytest.Config) -> None:
    """pytest-copie's `copie` fixtures (the render tier) copy this repository, wherever pytest
    runs from (its `--template` option, else the current folder)."""
    config.option.template = str(ROOT)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    scheduling.check(items)  # its tables still match the tests


def pytest_runtest_setup(item: pytest.Item) -> None:
    scheduling.lower_priority(item.nodeid)  # a worker that is not the engine's (scheduling.py)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` (pyproject.toml) runs tests/scheduling.py's scheduler."""
    return scheduling.scheduler(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_sessionfinish(session: pytest.Session) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(session.config, "workerinput"):
        scheduling.record(reporter.stats)  # the next run's costs (tests/scheduling.py)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Every serve's seconds from start to healthy (tests/test_serve.py puts them in its
    tests' reports), once each, in the order measured."""
    seen: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", []):
                if key == "serve_healthy_after":
                    seen.setdefault(value[0], value[1])
    if seen:
        terminalreporter.section("vllm serve: seconds from start to healthy")
        for name, seconds in seen.items():
            terminalreporter.write_line(f"{seconds:6.1f}  {name}")
