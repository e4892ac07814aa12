"""The peer tier: vLLM's own plugin tests against generated packages (docs/peer-tier.md).

For each target, vLLM's `tests/plugins_tests` from that version's sdist (tests/peer/
sources.py) run twice in the target's real vLLM: the baseline with vLLM's own dummy packages
(`tests/plugins/`) installed, the generated run with generated packages installed in their
place and the tests adapted as tests/peer/adaptations.yml says. A generated package must pass
wherever vLLM's dummy passes: a test that passes in the baseline and not in the generated run
fails the tier, attributed to the generated side; one that fails in both is not the
template's. Excluded tests are deselected on both sides, each with its reason (printed in the
inner run's summary and, as a warning, in this session's); a vLLM test file that the data
does not list fails the tier.

The baseline depends on vLLM alone, so its result is cached by its inputs (tests/peer/run.py,
"baseline cache"): `VPT_PEER_BASELINE=fresh` runs it again. `VPT_PEER_ALL=1` also runs the
tests the data lists as costly (a real `vllm serve`). The tests that start an engine run in
the newest CPU build (PEER_ENGINE_TARGETS); in an older one, tier 3 serves a plugin of every
kind of that release instead (tests/test_serve.py), and `VPT_ALL_TARGETS=1` or
`VPT_PEER_ALL=1` runs them there too. The tier runs in the newest target and the newest CPU
build (PEER_TARGETS); `VPT_ALL_TARGETS=1` runs it in every target.
"""

from __future__ import annotations

import datetime
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import PEER_ENGINE_TARGETS, PEER_TARGETS, SERVING_TARGET, VLLM
from peer import run, sources
from realvllm import envs

pytestmark = pytest.mark.peer


ELSEWHERE = (
    f"starts an engine, which the peer tier does in the newest CPU build ({SERVING_TARGET}) "
    "only; tier 3 serves a plugin of every kind of this release (tests/test_serve.py); "
    "VPT_ALL_TARGETS=1 or VPT_PEER_ALL=1 runs it here too"
)


class PeerExcluded(UserWarning):
    """The tests of vLLM the peer tier does not run, with the reason of each."""


def _site(venv: envs.VllmEnv, projects: list[Path], dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    if projects:
        envs.install_overlay(venv, projects, dest)
    return dest


def _dummies(src: Path, files: list[run.FilePlan], work: Path) -> list[Path]:
    """Copies of vLLM's dummy packages the files use (pip builds in the source folder)."""
    copies = []
    for d in sorted({d for f in files for d in f.spec.get("dummy") or []}):
        copies.append(work / "dummies" / d)
        shutil.copytree(src / "tests" / "plugins" / d, copies[-1])
    return copies


def _record(
    target: str,
    venv: envs.VllmEnv,
    plan: run.Plan,
    results: dict[str, Any],
    seconds: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    outcomes = {
        side: {run.strip_path(k): v for r in results[side].values() for k, v in r.outcomes.items()}
        for side in run.SIDES
    }
    deselected = {
        run.strip_path(k): v
        for side in run.SIDES
        for r in results[side].values()
        for k, v in r.deselected.items()
    }
    tests: dict[str, dict[str, str]] = {}
    files: dict[str, dict[str, Any]] = {}
    for fp in plan.files:
        if fp.excluded:
            files[fp.path] = {"excluded": " ".join(fp.excluded.split())}
            continue
        names = sorted(
            {t for side in run.SIDES for t in outcomes[side] if t.startswith(fp.path + "::")}
            | {t for t in deselected if t.startswith(fp.path + "::")}
        )
        files[fp.path] = {"tests": names}
        for t in names:
            if t in deselected:
                tests[t] = {"excluded": " ".join(deselected[t].split())}
            else:
                tests[t] = {side: outcomes[side].get(t, "not run") for side in run.SIDES}
                for side in run.SIDES:
                    if tests[t][side] != "passed":
                        tests[t][f"{side}_error"] = _first_error(results[side], t)
                if t.split("::", 1)[1].split("[")[0] in (fp.spec.get("costly") or {}):
                    tests[t]["costly"] = "runs with VPT_PEER_ALL=1 only"
    record = {
        "target": target,
        "vllm": venv.version,
        "wheel": VLLM["targets"][target]["wheel"],
        "date": datetime.date.today().isoformat(),
        "all": os.environ.get("VPT_PEER_ALL") == "1",
        "seconds": seconds,
        "files": files,
        "tests": tests,
        "verdict": run.compare(outcomes["baseline"], outcomes["generated"]),
    }
    return record, outcomes


@pytest.mark.parametrize("target", PEER_TARGETS)
def test_generated_packages_pass_where_vllm_dummies_pass(
    target: str, rendered, tmp_path: Path
) -> None:
    venv = envs.ensure(target)
    src = sources.fetch(venv.version)
    adapt = run.load()
    everything = os.environ.get("VPT_PEER_ALL") == "1"
    engines = venv.can_serve and (target in PEER_ENGINE_TARGETS or everything)
    why = ELSEWHERE if venv.can_serve and not engines else ""
    plan = run.plan(adapt, src, target, engines, everything, why)
    assert not plan.problems, "\n".join(plan.problems)

    started = time.monotonic()
    tools = run.pinned_tools(venv, src)
    projects, refused = run.generated_projects(plan, rendered, tmp_path)
    tiny = run.tiny_checkpoints(venv, rendered(**_tiny_source(target)))
    seconds: dict[str, Any] = {
        "prepare": time.monotonic() - started,
        "baseline": 0.0,
        "generated": 0.0,
        "baseline_cached": True,
        "lock_wait": 0.0,  # of the seconds above: waiting for other engines (tier 3's serves)
    }

    # Every run folder first: stale data (an edit that no longer matches) fails before any run.
    prepared = {
        (group, side): run.prepare(
            side, group, plan, adapt, src, projects, tmp_path / f"{side}-{group}" / "run"
        )
        for group in plan.groups
        for side in run.SIDES
    }
    results: dict[str, dict[str, run.SideResult]] = {side: {} for side in run.SIDES}
    for group in plan.groups:
        files = plan.running(group)
        for side in run.SIDES:
            started = time.monotonic()
            work = tmp_path / f"{side}-{group}"
            paths = prepared[group, side]
            if not paths:  # nothing of the group was generated (refused answers)
                continue
            extra = {**tiny, **run.group_env(adapt, group, venv.can_serve)}
            if side == "baseline":
                key = run.baseline_key(
                    work / "run",
                    venv.id,
                    (src / ".ready").read_text(),
                    tools.name,
                    extra,
                    run.group_plan(plan, group),
                    paths,
                    sorted(f.spec.get("dummy") or [] for f in files),
                    run.BASE_ENV,
                )
                cached = run.cached_baseline(target, group, key)
                if cached:
                    results[side][group] = cached
                    seconds["baseline"] += cached.seconds
                    continue
                site = _site(venv, _dummies(src, files, work), work / "site")
            else:
                keys = {run._package_key(f, target) for f in files}
                mine = [p for k, p in projects.items() if k in keys]
                site = _site(venv, mine, work / "site")
                group_env = (adapt["groups"].get(group) or {}).get("generated_env") or {}
                for p in mine:  # the group's own package names its switch
                    ctx = run.context(p)
                    extra.update(
                        {
                            run.fill(k, ctx, group): run.fill(v, ctx, group)
                            for k, v in group_env.items()
                        }
                    )
            result = run.execute(venv, side, group, plan, paths, work / "run", [site, tools], extra)
            result.seconds = time.monotonic() - started  # installs included
            results[side][group] = result
            seconds[side] += result.seconds
            seconds["lock_wait"] += sum(result.lock_waits.values())
            if side == "baseline":
                seconds["baseline_cached"] = False
                run.store_baseline(target, group, key, result)

    seconds = {k: round(v, 1) if isinstance(v, float) else v for k, v in seconds.items()}
    record, outcomes = _record(target, venv, plan, results, seconds)
    saved = run.save(target, record)
    print(f"peer {target}: {seconds}; results {saved}")

    deselected = {t: r["excluded"] for t, r in record["tests"].items() if "excluded" in r}
    listing = [f"{f}: {r['excluded']}" for f, r in record["files"].items() if "excluded" in r]
    listing += [f"{t}: {r}" for t, r in sorted(deselected.items())]
    warnings.warn(
        PeerExcluded(f"peer tier {target}: not run, with the reason:\n  " + "\n  ".join(listing)),
        stacklevel=1,
    )

    # The data must match what ran: no stale exclusion, no file that did not collect.
    problems = []
    for side in run.SIDES:
        for r in results[side].values():
            for table, names in r.unmatched.items():
                problems += [f"{side}: adaptations.yml {table} names no test: {n}" for n in names]
            problems += [
                f"{side}: collecting {k} failed:\n{v}" for k, v in r.collect_errors.items()
            ]
    if not any(o == "passed" for o in outcomes["baseline"].values()):
        problems.append("the baseline passed nothing: the harness is broken, not the template")
    verdict = record["verdict"]
    if verdict["baseline_only"]:
        problems.append(
            "passes with vLLM's dummy, not with the generated package:\n"
            + "\n".join(
                f"--- {t}\n{_why(t, plan, target, refused, results)}"
                for t in verdict["baseline_only"]
            )
        )
    if problems and verdict["generated_only"]:
        problems.append("passes only in the generated run: " + ", ".join(verdict["generated_only"]))
    assert not problems, "\n".join(problems)


def _first_error(results: dict[str, run.SideResult], test: str) -> str:
    """The first `E ` line of a test's failure report (what the docs table shows)."""
    for r in results.values():
        for k, v in r.details.items():
            if run.strip_path(k) == test:
                lines = [line[1:].strip() for line in v.splitlines() if line.startswith("E ")]
                return (lines or v.strip().splitlines()[-1:] or [""])[0][:200]
    return ""


def _tiny_source(target: str) -> dict[str, Any]:
    """A one-kind render the session shares with tiers 1-2 (the test kit's tiny module builds
    the stand-in checkpoints)."""
    from conftest import solo

    return solo("general", target)


def _why(
    test: str, plan: run.Plan, target: str, refused: dict[str, str], results: dict[str, Any]
) -> str:
    fp = next(f for f in plan.files if test.startswith(f.path + "::"))
    key = run._package_key(fp, target)
    if key in refused:
        return refused[key]
    for r in results["generated"].values():
        for k, v in r.details.items():
            if run.strip_path(k) == test:
                return v[-1500:]
    return "not run"
