"""`pytest --vllm-plugin=DIST`: check any installed vLLM plugin, generated or hand-written
(entry point `vllm_plugin_generic` in group `pytest11`; without the option it does nothing).

It reads DIST's entry points in vLLM's groups (`vllm.*`) and, in one fresh interpreter that
allows only DIST's general plugins (VLLM_PLUGINS), snapshots vLLM's registries around vLLM's
own `load_general_plugins()`: the difference is what DIST registers. Each finding is one
pytest item, so a failure names what failed:
- `entry_point[GROUP:NAME]`: the entry point resolves (`ep.load()`);
- `registers[REGISTRY:NAME]`: the name loads through vLLM's own loader;
- `idempotent`: each general-plugin function called twice more raises nothing and leaves the
  registries as they were (vLLM calls it once in every process it starts);
- `lazy`: no module a lazy entry names was imported by registration (the point of registering
  by string: the front end never imports model code or torch kernels).
Where each registry lives in each vLLM release is registries.json (written by the template's
tools/catalog.py from its catalog); the private names it reads are checked against each wheel.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

GROUP = "vllm.general_plugins"  # vllm.plugins.DEFAULT_PLUGINS_GROUP
DATA = Path(__file__).with_name("registries.json")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("vllm-plugin").addoption(
        "--vllm-plugin",
        dest="vllm_plugin_dist",
        metavar="DIST",
        help="check the installed distribution DIST's vLLM entry points and what they register",
    )


def _distribution(name: str) -> importlib.metadata.Distribution | None:
    for dist in importlib.metadata.distributions():
        if canonicalize_name(dist.metadata["Name"] or "") == canonicalize_name(name):
            return dist
    return None


def _vllm_entry_points(dist: importlib.metadata.Distribution) -> list[Any]:
    return [ep for ep in dist.entry_points if ep.group.startswith("vllm.")]


# -- the fresh interpreter (python -m pytest_vllm_plugin.generic DIST) --------------------------


def _get(obj: Any, attribute: str) -> Any:
    return getattr(obj, attribute) if attribute else obj


def _names(obj: Any, how: dict[str, Any]) -> list[str]:
    if "call" in how:
        return sorted(_get(obj, how["call"])())
    if "keys" in how:
        return sorted(_get(obj, how["keys"]))
    return sorted(obj)  # {"list": true}


def _lazy(obj: Any, how: dict[str, Any] | None, name: str) -> str | None:
    """The module a lazy entry names, or None where the registry holds the object itself."""
    if how is None:
        return None
    entry = _get(obj, how["entries"]).get(name)
    if entry is None:
        return None
    if "index" in how:
        return entry[how["index"]]
    return getattr(entry, how["attribute"], None)  # a model registered by class has none


def _load(obj: Any, how: dict[str, Any], name: str) -> Any:
    if "function" in how:
        return getattr(importlib.import_module(how["module"]), how["function"])(name)
    if "entries" in how:
        entry = _get(obj, how["entries"])[name]
        return entry if how["call"] is None else _get(entry, how["call"])()
    return getattr(obj, how["call"])(name)


def _snapshot(registries: dict[str, tuple[Any, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """registry -> {name: the lazy entry's module, or None}."""
    return {
        reg: {n: _lazy(obj, spec.get("lazy"), n) for n in _names(obj, spec["names"])}
        for reg, (obj, spec) in registries.items()
    }


def probe(name: str) -> dict[str, Any]:
    """What DIST registers, run in a fresh interpreter: see the module docstring."""
    import vllm
    import vllm.plugins

    release = ".".join(vllm.__version__.split(".")[:2])
    tables = json.loads(DATA.read_text())
    table = tables.get(release)
    if table is None:  # one line naming the release: the kit does not guess a registry's place
        known = ", ".join(tables)
        return {"error": f"vLLM {release} is not in pytest-vllm-plugin's registries.json "
                f"(it knows {known}): use a kit release that supports vLLM {release}"}  # fmt: skip
    registries = {
        reg: (getattr(importlib.import_module(spec["module"]), spec["attribute"]), spec)
        for reg, spec in table.items()
    }
    dist = _distribution(name)
    assert dist is not None
    eps = _vllm_entry_points(dist)
    before, modules = _snapshot(registries), set(sys.modules)
    vllm.plugins.load_general_plugins()  # what every vLLM process does, with VLLM_PLUGINS
    after, imported = _snapshot(registries), set(sys.modules) - modules
    found = {
        reg: {n: m for n, m in names.items() if n not in before[reg] or before[reg][n] != m}
        for reg, names in after.items()
    }
    lazy = sorted({m for names in found.values() for m in names.values() if m})
    own = {canonicalize_name(Path(str(f)).parts[0].removesuffix(".py")) for f in dist.files or []}
    result: dict[str, Any] = {
        "release": vllm.__version__,
        "registers": {reg: sorted(names) for reg, names in found.items() if names},
        "eager": [m for m in lazy if m in imported],
        "own": sorted(m for m in imported if canonicalize_name(m.partition(".")[0]) in own),
        "idempotent": [],
        "loads": {},
        "entry_points": {},
    }
    for ep in eps:  # twice more each: vLLM calls it once in every process it starts
        if ep.group != GROUP:
            continue
        try:
            func = ep.load()
            func()
            func()
        except Exception as exc:
            result["idempotent"].append(f"{ep.name}: {type(exc).__name__}: {exc}")
    if _snapshot(registries) != after:
        result["idempotent"].append("a second call changed what the registries hold")
    for reg, names in result["registers"].items():  # vLLM's own loaders, after the checks
        obj, spec = registries[reg]
        for n in names:
            try:
                loaded = _load(obj, spec["load"], n)
                result["loads"][f"{reg}:{n}"] = f"ok: {getattr(loaded, '__qualname__', loaded)}"
            except Exception as exc:
                result["loads"][f"{reg}:{n}"] = f"{type(exc).__name__}: {exc}"
    for ep in eps:
        try:
            ep.load()
            result["entry_points"][f"{ep.group}:{ep.name}"] = "ok"
        except Exception as exc:
            result["entry_points"][f"{ep.group}:{ep.name}"] = f"{type(exc).__name__}: {exc}"
    return result


def _run_probe(name: str, dist: importlib.metadata.Distribution) -> dict[str, Any]:
    general = [ep.name for ep in dist.entry_points if ep.group == GROUP]
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    # Only DIST's general plugins run, so the difference is DIST's ("" allows none).
    env["VLLM_PLUGINS"] = ",".join(general)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_vllm_plugin.generic", name],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    last = proc.stdout.strip().splitlines()[-1:] if proc.returncode == 0 else []
    if not last:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
        return {"error": "the fresh interpreter failed:\n" + "\n".join(tail)}
    return json.loads(last[0])


# -- the items ---------------------------------------------------------------------------------


class CheckItem(pytest.Item):
    def __init__(self, *, check: Callable[[], None], **kw: Any) -> None:
        super().__init__(**kw)
        self.check = check

    def runtest(self) -> None:
        self.check()

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if excinfo.errisinstance(AssertionError):
            return str(excinfo.value)  # the finding itself, not the kit's traceback
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int, str]:
        return "vllm-plugin", 0, self.name


def _fail(text: str) -> Callable[[], None]:
    def check() -> None:
        raise AssertionError(text)

    return check


def _expect(ok: bool, text: str) -> Callable[[], None]:
    return (lambda: None) if ok else _fail(text)


def _checks(name: str) -> Iterator[tuple[str, Callable[[], None]]]:
    dist = _distribution(name)
    if dist is None:
        yield "installed", _fail(f"no installed distribution is named {name}")
        return
    if not _vllm_entry_points(dist):
        yield "entry_points", _fail(f"{name} declares no entry point in a vllm.* group")
        return
    found = _run_probe(name, dist)
    if "error" in found:
        yield "registries", _fail(found["error"])
        return
    for ep, said in found["entry_points"].items():
        yield f"entry_point[{ep}]", _expect(said == "ok", f"{ep} does not resolve: {said}")
    for key, said in found["loads"].items():
        ok = said.startswith("ok")
        yield f"registers[{key}]", _expect(ok, f"vLLM's loader cannot load {key}: {said}")
    problems = "\n".join(found["idempotent"])
    yield "idempotent", _expect(not problems, f"not idempotent:\n{problems}")
    eager, own = ", ".join(found["eager"]), ", ".join(found["own"]) or "none"
    yield "lazy", _expect(not eager, f"registration imported {eager} (modules of {name} "
                          f"imported by registration: {own})")  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    name = config.getoption("vllm_plugin_dist")
    if not name:
        return
    for check_name, check in _checks(name):
        nodeid = f"vllm-plugin[{name}]::{check_name}"  # what a report line names
        items.append(CheckItem.from_parent(session, name=check_name, nodeid=nodeid, check=check))


def pytest_report_header(config: pytest.Config) -> str | None:
    name = config.getoption("vllm_plugin_dist")
    return f"vllm-plugin: checking the installed distribution {name}" if name else None


if __name__ == "__main__":
    print(json.dumps(probe(sys.argv[1])))
