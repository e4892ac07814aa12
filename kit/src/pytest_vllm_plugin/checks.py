"""The fresh-process checks of a generated plugin: what does not depend on its answers.

The plugin's tests/vllm_checks.py holds only its check_<kind>/absent_<kind> functions and the
table CHECKS (step name -> the kind, then the arguments of check_<kind> and absent_<kind>), and
ends by calling main(): `python tests/vllm_checks.py GROUP` runs one group in this fresh
interpreter and prints `VLLM_CHECKS {"ok": [...], "failed": {name: traceback}}`. A fresh process
is the only honest test: vLLM loads plugins once per process, from installed metadata.
plugin.py collects the tests that start these processes (plan() says which).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import traceback
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

Namespace = dict[str, Any]  # the script's globals
Checks = dict[str, Callable[[], None]]


def declared(root: Path) -> dict[str, dict[str, str]]:
    """The vLLM entry points (group -> name -> value) root's pyproject.toml declares."""
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    groups = meta.get("project", {}).get("entry-points", {})
    return {g: dict(eps) for g, eps in groups.items() if g.startswith("vllm.")}


def entry_points(root: Path, name: str | None = None) -> None:
    """The installed distribution's vllm.* entry points are exactly what root's pyproject.toml
    declares (vLLM finds plugins through installed metadata; `name`: the distribution, else
    [project].name), and each loads."""
    name = name or tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"]
    try:
        eps = [
            e
            for e in importlib.metadata.distribution(name).entry_points
            if e.group.startswith("vllm.")
        ]
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError(f"{name} is not installed (pip install -e .)") from None
    installed: dict[str, dict[str, str]] = {}
    for ep in eps:
        installed.setdefault(ep.group, {})[ep.name] = ep.value
    want = declared(root)
    assert installed == want, f"installed {installed}, pyproject.toml declares {want}: reinstall"
    for ep in eps:
        assert ep.load() is not None, f"{ep.group} {ep.name} loads as None"


def general_plugin(root: Path) -> str | None:
    """The module of the plugin's general-plugin entry point (`acme._plugin:register` ->
    `acme._plugin`): its STEPS, _done, DISABLE_ENV (and _waiting) are what these checks drive."""
    values = declared(root).get("vllm.general_plugins", {}).values()
    return next((v.partition(":")[0].strip() for v in values), None)


def root_of(script: Path) -> Path:
    """The project folder above the script: the first with a pyproject.toml."""
    return next(p for p in Path(script).resolve().parents if (p / "pyproject.toml").is_file())


def load(path: Path) -> types.ModuleType:
    """The module at `path`, by path: a plugin's tests folder is not a package, and pytest may
    not put it on sys.path (--import-mode=importlib). The kit reads the plugin's
    tests/vllm_checks.py (which imports nothing of vLLM at its top) and tests/serve_plan.py so."""
    spec = importlib.util.spec_from_file_location(f"_vllm_plugin_{path.stem}", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def helper(step: str, row: str | tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """A row of the general plugin's table (_plugin.py STEPS) as the glue runs it: the name of
    its helper, then the helper's arguments. Step "kind:name" runs `_<kind>` (`_<kind>_<what>`
    for "kind:name:what") with the name, then the row: a tuple of arguments, or the string
    "module:Class" standing for the two arguments module and class."""
    kind, _, name = step.partition(":")
    name, _, what = name.partition(":")
    args = tuple(row.split(":")) if isinstance(row, str) else tuple(row)
    return f"_{kind}_{what}" if what else f"_{kind}", (name, *args) if name else args


def rows(steps: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The CHECKS rows of a general plugin's STEPS: the helper's name without its "_" (so
    check_<kind> and absent_<kind> are the step's checks), then the helper's arguments."""
    out: dict[str, tuple[Any, ...]] = {}
    for step, row in steps.items():
        name, args = helper(step, row)
        out[step] = (name.removeprefix("_"), *args)
    return out


def table(path: Path) -> dict[str, tuple[Any, ...]]:
    """The CHECKS rows of the instances vLLM loads from an entry point or a config hook (not
    the general plugin's STEPS): the "check" of each line of the JSON table at `path` (a
    generated plugin's tests/instances.json), after the kind its key starts with."""
    lines = json.loads(Path(path).read_text())["instances"]
    return {k: (k.partition(":")[0], *v["check"]) for k, v in lines.items() if "check" in v}


def _check(ns: Namespace, step: str, prefix: str = "check_") -> Callable[[], None]:
    kind, *args = ns["CHECKS"][step]
    return partial(ns[prefix + kind], *args)


def loaders(ns: Namespace) -> Checks:
    """After vLLM's own load_general_plugins(), each step is where vLLM's own loader looks, and
    registering imported none of LAZY_MODULES (registered by import string)."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    imported = [m for m in ns.get("LAZY_MODULES", []) if m in sys.modules]

    def check_lazy() -> None:
        assert not imported, f"registration imported {imported}"

    return {"lazy": check_lazy, **{step: _check(ns, step) for step in ns["CHECKS"]}}


def register_all(plugin: types.ModuleType) -> None:
    """What vLLM's load_general_plugins() calls of the glue: register(), and register(name) for
    each of the package's other general-plugin entry points (the glue's ENTRY_POINTS)."""
    plugin.register()
    for name in getattr(plugin, "ENTRY_POINTS", {}):
        plugin.register(name)


def idempotency(ns: Namespace) -> Checks:
    """A step waiting for its registry's module runs once vLLM imports it; register() called 3
    times, after a re-import, and after a failed step (with every entry point's steps)."""
    plugin = importlib.import_module(ns["PLUGIN"])

    def after_import() -> None:
        # In this fresh process vLLM has imported no registry yet: the steps marked
        # @_after_import wait for their module, and run (once) when it is imported.
        register_all(plugin)
        for module, names in list(plugin._waiting.items()):
            importlib.import_module(module)
            for name in names:
                assert name in plugin._done, f"step {name} did not run when {module} was imported"
        assert not plugin._waiting, f"steps still waiting: {plugin._waiting}"
        register_all(plugin)

    def three_calls() -> None:
        for _ in range(3):
            register_all(plugin)

    def after_reimport() -> None:
        register_all(importlib.reload(plugin))
        register_all(plugin)

    def after_partial_failure() -> None:
        fresh = importlib.reload(plugin)  # an empty _done, as in a new process
        names = list(fresh.STEPS)
        last = names[-1]
        name = helper(last, fresh.STEPS[last])[0]
        real = getattr(fresh, name)

        def fail(*args: Any) -> None:
            raise RuntimeError("simulated failure")

        setattr(fresh, name, fail)  # the glue looks the helper up when it runs the step
        try:
            register_all(fresh)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the failing step did not raise")
        assert last not in fresh._done, "a failed step was marked done"
        setattr(fresh, name, real)
        register_all(fresh)
        assert set(names) == fresh._done, fresh._done

    checks = {
        "three_calls": three_calls,
        "after_reimport": after_reimport,
        "after_partial_failure": after_partial_failure,
    }
    # Where a step waits for its registry's module (the glue has no import hook otherwise).
    return {"after_import": after_import, **checks} if hasattr(plugin, "_waiting") else checks


def switches(ns: Namespace) -> Checks:
    """The switches, through vLLM's own loader: the steps in CHECKS_OFF (switched off by the
    test with the DISABLE variable, those in CHECKS_PREDICATE by a stand-in for switches.py,
    or those in CHECKS_BUILTIN by vLLM listing their names already) registered nothing; every
    other step registered."""
    off = set(filter(None, os.environ.get("CHECKS_OFF", "").split(",")))
    for name in filter(None, os.environ.get("CHECKS_BUILTIN", "").split(",")):
        ns["PRETEND"][name]()
    predicate = set(filter(None, os.environ.get("CHECKS_PREDICATE", "").split(",")))
    if predicate:
        # The rules of the plugin's switches.py are replaced here: this checks the glue.
        rules = importlib.import_module(ns["PLUGIN"].rpartition(".")[0] + ".switches")
        rules.enabled = lambda step: step not in predicate
    checks = loaders(ns)
    del checks["lazy"]
    if "VLLM_PLUGINS" in os.environ:  # one general-plugin entry point: vLLM loads no other plugin
        steps = importlib.import_module(ns["PLUGIN"]).STEPS
        checks = {name: check for name, check in checks.items() if name in steps}
    for name in off:
        # absent_<kind>, with check_<kind>'s arguments: vLLM's registry lacks what it registers.
        checks[name] = _check(ns, name, "absent_")
    return checks


GROUPS: dict[str, Callable[[Namespace], Checks]] = {
    "loaders": loaders,
    "idempotency": idempotency,
    "switches": switches,
}


def group(name: str, ns: Namespace) -> Checks:
    """A group's checks (none but the loaders' without a general plugin)."""
    if "PLUGIN" not in ns:
        ns["PLUGIN"] = general_plugin(root_of(ns["__file__"]))
    return GROUPS[name](ns) if ns["PLUGIN"] or name == "loaders" else {}


def main(name: str, ns: Namespace) -> None:
    """Runs a group's checks in this process; prints one `VLLM_CHECKS {json}` line."""
    result: dict[str, Any] = {"ok": [], "failed": {}}
    for key, check in group(name, ns).items():
        try:
            check()
        except Exception:
            result["failed"][key] = traceback.format_exc()
        else:
            result["ok"].append(key)
    print("VLLM_CHECKS " + json.dumps(result))


def plan(ns: Namespace, steps: list[str], disable_env: str) -> dict[str, dict[str, str]]:
    """The fresh processes of the switches test, by id: each its environment. `steps`: the
    general plugin's steps that register something, in order. What each switch turns off: a
    step by name and a whole kind by the DISABLE variable, another step by the switches.py
    stand-in, the stand_down steps (PRETEND) by vLLM listing their names; switches that turn
    off different steps share one fresh process."""
    first, last_kind = steps[0], steps[-1].partition(":")[0]
    by_variable = {first, *(s for s in steps if s.startswith(f"{first}:"))}
    by_variable |= {s for s in steps if s.split(":")[0] == last_kind}
    by_predicate = next((s for s in reversed(steps) if s not in by_variable), steps[-1])
    switches: dict[str, tuple[dict[str, str], set[str]]] = {
        "disable": ({disable_env: f"{first},{last_kind}"}, by_variable),
        "predicate": ({"CHECKS_PREDICATE": by_predicate}, {by_predicate}),
    }
    if stand_down := sorted(ns.get("PRETEND", {})):
        switches["stand_down"] = ({"CHECKS_BUILTIN": ",".join(stand_down)}, set(stand_down))
    runs: list[list[str]] = []
    for name, (_, off) in switches.items():
        free = [r for r in runs if not any(off & switches[other][1] for other in r)]
        if free:
            free[0].append(name)
        else:
            runs.append([name])
    envs = {}
    for run in runs:
        env: dict[str, str] = {}
        for name in run:
            env.update(switches[name][0])
        off = set().union(*(switches[name][1] for name in run))
        envs["+".join(run)] = {**env, "CHECKS_OFF": ",".join(sorted(off))}
    return envs
