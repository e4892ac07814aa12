"""Building blocks for the extraction recipes in extensions/<kind>/recipe.py.

Each factory returns a `Values`: a function from a wheel to one JSON value (usually a sorted
list of names), so that a recipe reads as data: which file, which variable, which call.
A missing file or variable raises FactsError: a recipe that no longer matches vLLM must fail
loudly, not extract an empty list.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools import pyread
from tools.wheelsrc import FactsError, Wheel, cache_root, write_atomic

Values = Callable[[Wheel], Any]

HTTP_DECORATORS = {
    "get": "GET",
    "post": "POST",
    "put": "PUT",
    "delete": "DELETE",
    "patch": "PATCH",
    "head": "HEAD",
    "options": "OPTIONS",
    "websocket": "WEBSOCKET",
    "api_route": None,  # methods= says which
}
ROUTE_CALLS = {
    "add_api_route": "GET",
    "add_websocket_route": "WEBSOCKET",
    "add_route": "GET",
    "mount": "MOUNT",
}
# Starlette route objects built directly, e.g. `Mount("/metrics", app)` appended to app.routes.
ROUTE_CLASSES = {
    "Mount": "MOUNT",
    "Route": "GET",
    "APIRoute": "GET",
    "WebSocketRoute": "WEBSOCKET",
}


def _names(value: object) -> list[str]:
    """Names held by a constant: dict keys, Literal members, or list/tuple/set elements."""
    if isinstance(value, dict):
        value = list(value)
    elif isinstance(value, pyread.LiteralType):
        value = list(value.values)
    if not isinstance(value, list | tuple | set | frozenset):
        raise FactsError(f"expected a dict, list or Literal, got {type(value).__name__}")
    return sorted({str(pyread.plain(v)) for v in value})


def _files(wheel: Wheel, pattern: str) -> list[str]:
    if any(c in pattern for c in "*?["):
        found = [p for p in wheel.py_files() if fnmatch.fnmatch(p, pattern)]
    else:
        found = [pattern] if wheel.has(pattern) else []
    if not found:
        raise FactsError(f"no file matches {pattern}")
    return found


def _memo(wheel: Wheel, key: tuple[object, ...], compute: Callable[[], Any]) -> Any:
    # Several fields of one kind come from one scan of the tree: scan once per wheel.
    if key not in wheel.memo:
        wheel.memo[key] = compute()
    return wheel.memo[key]


# The reading code: a change to it makes every stored scan stale.
_SOURCES = [Path(__file__), Path(__file__).with_name("pyread.py")]


def _stored(wheel: Wheel, key: tuple[str, ...], compute: Callable[[], Any]) -> Any:
    """`_memo`, and kept on disk for the whole-tree scans that take seconds (a subclass family
    over every file): a pure function of the wheel's bytes and of this reading code, keyed by
    both, under the wheels' cache."""

    def load_or_compute() -> Any:
        code = hashlib.sha256(b"".join(p.read_bytes() for p in _SOURCES)).hexdigest()[:12]
        name = hashlib.sha256(json.dumps([wheel.sha256, code, *key]).encode()).hexdigest()
        path = cache_root() / "scans" / f"{name[:24]}.json"
        if path.is_file():
            return json.loads(path.read_text())
        text = json.dumps(compute())
        write_atomic(path, text)
        return json.loads(text)  # as a later run reads it: lists, not tuples

    return _memo(wheel, key, load_or_compute)


def nothing() -> Values:
    """No built-in names (the kind adds to a group that vLLM itself leaves empty)."""
    return lambda wheel: []


def constant(path: str, var: str) -> Values:
    """Names in module constant `var`: a dict's keys, a Literal's members, a list's items."""
    return lambda wheel: _names(wheel.evaluate(path, var))


def optional(values: Values) -> Values:
    """`values`, or None (field left out) when its variable or file does not exist."""

    def run(wheel: Wheel) -> Any:
        try:
            return values(wheel)
        except FactsError:
            return None

    return run


def extra_keys(path: str, var: str, minus: Values) -> Values:
    """Names in `var` that are not in `minus`."""
    return lambda wheel: sorted(set(_names(wheel.evaluate(path, var))) - set(minus(wheel)))


def module_class_map(path: str, var: str, package: str) -> Values:
    """{key: "module:Class"} for a dict of key -> (module, Class); relative modules are taken
    under `package`, fully qualified ones (`vllm.x`) as they are (registry._resolve_module_name)."""

    def run(wheel: Wheel) -> dict[str, str]:
        table = wheel.evaluate(path, var)
        if not isinstance(table, dict):
            raise FactsError(f"{path}: {var} is not a dict")
        out = {}
        for key, (module, cls) in table.items():
            full = module if module.startswith("vllm.") else f"{package}.{module}"
            out[key] = f"{full}:{cls}"
        return out

    return run


def calls(pattern: str, call: str, keyword: str = "name") -> Values:
    """First string argument of every `Receiver.method(...)` call in the matching files."""
    receiver, method = call.rsplit(".", 1)

    def run(wheel: Wheel) -> list[str]:
        found = set()
        for path in _files(wheel, pattern):
            for node in ast.walk(wheel.tree(path)):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == method
                    and pyread.dotted_name(node.func.value) == receiver
                ):
                    name = pyread.first_str_arg(node, keyword)
                    if name is not None:
                        found.add(name)
        return sorted(found)

    return run


def entry_point_names(group: str) -> Values:
    """vLLM's own entry points in `group` (the wheel's *.dist-info/entry_points.txt)."""
    return lambda wheel: sorted(wheel.entry_points(group))


def has_symbol(path: str, symbol: str) -> Callable[[Wheel], bool]:
    """True when `symbol` is defined in `path`: decides whether a kind exists in a target."""
    return lambda wheel: (
        wheel.has(path) and pyread.find_symbol(wheel.tree(path), symbol) is not None
    )


def _class(wheel: Wheel, path: str, cls: str) -> ast.ClassDef:
    node = pyread.find_symbol(wheel.tree(path), cls)
    if not isinstance(node, ast.ClassDef):
        raise FactsError(f"{path}: no class {cls}")
    return node


def _enum_values(wheel: Wheel, path: str, cls: str) -> dict[str, object]:
    # Enum members are the class body's plain assignments; methods and nested classes are not.
    evaluator = pyread.Evaluator(wheel.tree(path))
    out = {}
    for stmt in pyread.flatten(_class(wheel, path, cls).body):
        for name in pyread.assigned_names(stmt):
            if not name.startswith("_"):
                out[name] = pyread.plain(evaluator.eval(stmt.value, {}))  # type: ignore[attr-defined]
    return out


def enum_members(path: str, cls: str) -> Values:
    return lambda wheel: sorted(_enum_values(wheel, path, cls))


def _enum_refs(wheel: Wheel, path: str, function: str, enum_path: str, enum: str) -> list[str]:
    node = pyread.find_symbol(wheel.tree(path), function)
    if node is None:
        raise FactsError(f"{path}: no function {function}")
    members = _enum_values(wheel, enum_path, enum)
    refs = {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name)
        and n.value.id == enum
        and n.attr in members
    }
    return sorted(refs)


def enum_refs(path: str, function: str, enum_path: str, enum: str) -> Values:
    """Members of `enum` that the body of `function` mentions (e.g. what CPU accepts)."""
    return lambda wheel: _enum_refs(wheel, path, function, enum_path, enum)


def enum_ref_values(path: str, function: str, enum_path: str, enum: str) -> Values:
    """{member: value} for the members `enum_refs` finds."""

    def run(wheel: Wheel) -> dict[str, object]:
        values = _enum_values(wheel, enum_path, enum)
        return {m: values[m] for m in _enum_refs(wheel, path, function, enum_path, enum)}

    return run


def _decorated(wheel: Wheel, module: str, cls: str) -> list[tuple[str, str, str]]:
    """(class, op name, module) for every `@<cls>.register("op")` class whose `<cls>` is the one
    defined in `module` (a same-named copy elsewhere, like hw_agnostic's, is another registry)."""
    found = []
    needle = f"{cls}.register("
    for path in wheel.py_files():
        if needle not in wheel.text(path):
            continue
        tree = wheel.tree(path)
        aliases = {
            local for local, orig in pyread.imported_from(tree, module).items() if orig == cls
        }
        if pyread.module_of(path) == module:
            aliases.add(cls)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and isinstance(dec.func, ast.Attribute)
                    and dec.func.attr == "register"
                    and isinstance(dec.func.value, ast.Name)
                    and dec.func.value.id in aliases
                ):
                    op = pyread.first_str_arg(dec, "name")
                    if op is not None:
                        found.append((node.name, op, pyread.module_of(path)))
    return sorted(found)


def _children(node: ast.AST) -> list[ast.AST]:
    """The child nodes that can use a name as a value: base classes, annotations and the
    class argument of isinstance/issubclass are left out."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.body]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        defaults = [d for d in (*node.args.defaults, *node.args.kw_defaults) if d]
        return [*node.decorator_list, *defaults, *node.body]
    if isinstance(node, ast.AnnAssign):
        return [node.target] + ([node.value] if node.value else [])
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("isinstance", "issubclass")
        and len(node.args) == 2
    ):
        return [node.func, node.args[0]]
    return list(ast.iter_child_nodes(node))


def _value_uses(wheel: Wheel, path: str) -> set[str]:
    """Names a module uses as values: called, assigned, passed, returned. A name seen only as a
    base class, in an import, an annotation or an isinstance/issubclass check is not counted."""

    def scan() -> set[str]:
        used = set()
        stack: list[ast.AST] = [wheel.tree(path)]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                used.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                used.add(node.attr)
            stack += _children(node)
        return used

    return _memo(wheel, ("value_uses", path), scan)


# A class statement and its base list (a cheap first look, before a file is parsed).
CLASS_BASES = re.compile(r"^[ \t]*class\s+\w+\s*\(([^:]*)\)\s*:", re.M)


Member = tuple[str, str | None, str, bool, list[str]]


def _family(wheel: Wheel, module: str, cls: str) -> list[Member]:
    """(class, op name or None, module, built, parent classes) for every class that subclasses,
    at any depth, the `<cls>` defined in `module`. Built: vLLM uses the class as a value
    somewhere (a class only ever subclassed, like RotaryEmbeddingBase, is never built). The op
    name is the one of the nearest `@<cls>.register("op")` class in its chain (register sets
    `name`, which subclasses inherit). Only files whose text could hold a match are parsed."""
    root = (wheel.module_path(module), cls)
    files = wheel.py_files()
    bases = {p: " ".join(CLASS_BASES.findall(wheel.text(p))) for p in files}
    registered = {(name, mod): op for name, op, mod in _decorated(wheel, module, cls)}
    # Grow the family from the root, one generation a pass.
    family: dict[tuple[str, str], tuple[str | None, list[str]]] = {root: (None, [])}
    new = {cls}
    while new:
        names, new = {name for _, name in family}, set()
        word = re.compile(r"\b(?:" + "|".join(sorted(names)) + r")\b")
        for path in (p for p in files if word.search(bases[p])):
            for node in ast.walk(wheel.tree(path)):
                if not isinstance(node, ast.ClassDef) or (path, node.name) in family:
                    continue
                if not any(pyread.base_name(b) in names for b in node.bases):
                    continue
                parents = [(bp, bc.name) for bp, bc in wheel.bases(path, node)]
                parents = [p for p in parents if p in family]
                if not parents:
                    continue
                own = registered.get((node.name, pyread.module_of(path)))
                op = own or next((family[p][0] for p in parents if family[p][0]), None)
                family[(path, node.name)] = (op, [name for _, name in parents])
                new.add(node.name)
    del family[root]
    rows = []
    for (path, name), (op, parents) in sorted(family.items(), key=lambda kv: kv[0][1]):
        built = any(name in _value_uses(wheel, p) for p in files if name in wheel.text(p))
        rows.append((name, op, pyread.module_of(path), built, [p for p in parents if p != cls]))
    return rows


def built_subclasses(module: str, cls: str, field: str) -> Values:
    """One view of the `_family` scan of `<cls>`'s subclasses: `names` (the classes vLLM
    builds: what register_oot takes and `__new__` looks up), `op_names` {class: op} where one
    exists, `modules` {class: module}, `duplicates` {class: [modules]} for a class name defined
    in several modules (`modules` then holds the first), `bases_only` {class: [built
    subclasses]} for the classes vLLM never builds itself, `own_forward` {class: the class in
    its chain below `<cls>` that defines `forward`}."""

    def run(wheel: Wheel) -> Any:
        rows = _stored(wheel, ("family", module, cls), lambda: _family(wheel, module, cls))
        by_class: dict[str, list[tuple[str | None, str]]] = {}
        for name, op, mod, built, _ in rows:
            if built:
                by_class.setdefault(name, []).append((op, mod))
        if field == "names":
            return sorted(by_class)
        if field == "op_names":
            return {n: e[0][0] for n, e in by_class.items() if e[0][0] is not None}
        if field == "modules":
            return {n: e[0][1] for n, e in by_class.items()}
        if field == "own_forward":
            # CustomOp.forward dispatches to forward_native/forward_cpu/...; a class that
            # defines forward itself decides on its own whether a replacement's kernels run.
            owners = {}
            root = (wheel.module_path(module), cls)
            for name, _, mod, built, _ in rows:
                found = wheel.resolve_class(wheel.module_path(mod) or "", name) if built else None
                chain = wheel.class_chain(*found) if found else []
                first = next(
                    ((p, c.name) for p, c in chain if "forward" in pyread.class_members(c)), root
                )
                if first != root and name in by_class:
                    owners[name] = first[1]
            return owners or None
        if field == "bases_only":
            children: dict[str, set[str]] = {}
            for name, _, _, _, parents in rows:
                for parent in parents:
                    children.setdefault(parent, set()).add(name)

            def below(name: str) -> set[str]:
                found = set()
                for child in children.get(name, ()):
                    found |= {child} if child in by_class else set()
                    found |= below(child)
                return found

            unbuilt = {name for name, *_ in rows if name not in by_class}
            # Shortest first: the plain subclass (RotaryEmbedding) before the variants.
            order = {n: sorted(below(n), key=lambda c: (len(c), c)) for n in sorted(unbuilt)}
            return {n: subs for n, subs in order.items() if subs} or None
        dupes = {n: sorted(m for _, m in e) for n, e in by_class.items() if len(e) > 1}
        return dupes or None

    return run


def function_imports(path: str, function: str) -> Values:
    """`module.Name` for every `from module import Name` inside one function's body."""

    def run(wheel: Wheel) -> list[str]:
        node = pyread.find_symbol(wheel.tree(path), function)
        if node is None:
            raise FactsError(f"{path}: no function {function}")
        return sorted(
            f"{n.module}.{a.name}"
            for n in ast.walk(node)
            if isinstance(n, ast.ImportFrom) and n.level == 0
            for a in n.names
        )

    return run


def class_attributes(*classes: tuple[str, str]) -> Values:
    """Public class attributes of each (path, class) and its bases inside vLLM, united."""

    def run(wheel: Wheel) -> list[str]:
        names: set[str] = set()
        for path, cls in classes:
            names |= wheel.public_attributes(path, _class(wheel, path, cls))
        return sorted(names)

    return run


def _route(node: ast.Call, default: str | None) -> tuple[str, list[str]] | None:
    path = pyread.first_str_arg(node, "path")
    if path is None:
        return None
    methods_kw = next((k.value for k in node.keywords if k.arg == "methods"), None)
    if isinstance(methods_kw, ast.List | ast.Tuple | ast.Set):
        methods = [str(e.value).upper() for e in methods_kw.elts if isinstance(e, ast.Constant)]
    else:
        methods = [default or "GET"]
    return path, methods


# A cheap text filter before parsing: only files that may register a route are parsed.
_ROUTE_HINT = re.compile(
    r"\b(app|\w*router)\s*\.\s*(" + "|".join([*HTTP_DECORATORS, *ROUTE_CALLS]) + r")\s*\("
    r"|\b(" + "|".join(ROUTE_CLASSES) + r")\s*\("
)


def _routes(wheel: Wheel, prefix: str) -> dict[str, list[str]]:
    """path -> methods for `@router.post("/x")`-style decorators, `app.add_api_route("/x")` and
    `app.mount("/x")` calls whose receiver is named `app` or `...router`, and `Mount("/x")`."""
    found: dict[str, set[str]] = {}
    for path in wheel.py_files(prefix):
        if not _ROUTE_HINT.search(wheel.text(path)):
            continue
        for node in ast.walk(wheel.tree(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ROUTE_CLASSES
            ):
                route = _route(node, ROUTE_CLASSES[node.func.id])
                if route:
                    found.setdefault(route[0], set()).update(route[1])
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = pyread.dotted_name(node.func.value) or ""
            if not (receiver == "app" or receiver.endswith("router")):
                continue
            attr = node.func.attr
            if attr in HTTP_DECORATORS:
                route = _route(node, HTTP_DECORATORS[attr])
            elif attr in ROUTE_CALLS:
                route = _route(node, ROUTE_CALLS[attr])
            else:
                continue
            if route:
                found.setdefault(route[0], set()).update(route[1])
    return {p: sorted(m) for p, m in found.items()}


def routes(prefix: str) -> Values:
    return lambda wheel: sorted(_memo(wheel, ("routes", prefix), lambda: _routes(wheel, prefix)))


def route_methods(prefix: str) -> Values:
    return lambda wheel: _memo(wheel, ("routes", prefix), lambda: _routes(wheel, prefix))


# -- patch targets -----------------------------------------------------------------------------

# Decorators that make a def an attribute, not a function a patch wraps.
_PROPERTY_DECORATORS = {"property", "cached_property", "functools.cached_property"}


def signature_text(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A def's parameters as `str(inspect.signature(...))` writes them once annotations are
    dropped and every default is `...`: names, kinds (`/`, `*`, `*args`, `**kw`) and which have
    a default. The generated plugin computes the same text from the live function, so the two
    compare as strings; default values and annotations are left out (they are not what a
    wrapper that calls through depends on, and `repr` of a default is not stable)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    out: list[str] = []
    for i, p in enumerate(positional):
        out.append(p.arg + ("=..." if i >= first_default else ""))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            out.append("/")
    if a.vararg:
        out.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        out.append("*")
    keywords = zip(a.kwonlyargs, a.kw_defaults, strict=True)
    out += [p.arg + ("=..." if d is not None else "") for p, d in keywords]
    if a.kwarg:
        out.append("**" + a.kwarg.arg)
    return "(" + ", ".join(out) + ")"


# A function whose parameters the source does not tell: a class decorator may replace its
# `__init__` (vLLM's support_torch_compile does, with `*args, **kwargs`). Checked to exist.
UNKNOWN_PARAMETERS = "(...)"


def _field_without_default(stmt: ast.stmt) -> bool:
    """`x: T = field(default_factory=...)` (or `field(init=False)`): a dataclass field that is
    not an attribute of the class object."""
    value = stmt.value if isinstance(stmt, ast.AnnAssign) else None
    if not isinstance(value, ast.Call):
        return False
    name = (pyread.dotted_name(value.func) or "").rpartition(".")[2]
    keywords = {k.arg for k in value.keywords}
    return name in ("field", "Field") and "default" not in keywords and not value.args


def _symbols(
    body: list[ast.stmt], prefix: str, depth: int, out: dict[str, str], decorators: tuple = ()
) -> None:
    # A class decorator other than these may replace the class's __init__.
    rewrites = any(d not in ("dataclass", "final", "runtime_checkable") for d in decorators)
    for stmt in _runtime_statements(body):
        if rewrites and isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            out[prefix + stmt.name] = UNKNOWN_PARAMETERS
        elif _field_without_default(stmt) or (
            decorators and isinstance(stmt, ast.AnnAssign) and isinstance(stmt.value, ast.Call)
        ):
            continue  # a dataclass field made by a call (get_field(...)) may not be on the class
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = set(pyread.decorator_names(stmt))
            if "overload" in decorators or "typing.overload" in decorators:
                continue
            accessor = any(d.endswith((".setter", ".deleter")) for d in decorators)
            if decorators & _PROPERTY_DECORATORS or accessor:
                out[prefix + stmt.name] = "property"
            else:
                out[prefix + stmt.name] = signature_text(stmt)  # the last def wins, as at run time
        elif isinstance(stmt, ast.ClassDef):
            out[prefix + stmt.name] = "class"
            if depth < 2:
                decorators = tuple(d.rpartition(".")[2] for d in pyread.decorator_names(stmt))
                _symbols(stmt.body, f"{prefix}{stmt.name}.", depth + 1, out, decorators)
        else:
            for name in pyread.assigned_names(stmt):
                out[prefix + name] = "value"


def _runtime_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """pyread.flatten, less the `if TYPE_CHECKING:` blocks (names that never exist at run time)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            if pyread.dotted_name(stmt.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                out += _runtime_statements(stmt.body)
            out += _runtime_statements(stmt.orelse)
        else:
            out += pyread.flatten([stmt])
    return out


def _symbols_of(wheel_path: str, paths: list[str]) -> dict[str, dict[str, str]]:
    """_symbols of each file (run in a worker process: parsing 50 MB of source is the cost)."""
    from zipfile import ZipFile

    found: dict[str, dict[str, str]] = {}
    with ZipFile(wheel_path) as z:
        for path in paths:
            try:
                tree = ast.parse(z.read(path).decode("utf-8"), filename=path)
            except SyntaxError:
                continue
            symbols: dict[str, str] = {}
            _symbols(tree.body, "", 0, symbols)
            # Names the module imports are targets too (patch a function where a module looks
            # it up): "import <module>:<name>" until _patch_targets resolves them.
            for stmt in _runtime_statements(tree.body):
                if isinstance(stmt, ast.ImportFrom):
                    source = pyread.absolute_module(path, "." * stmt.level + (stmt.module or ""))
                    for alias in stmt.names:
                        if alias.name != "*":
                            name = alias.asname or alias.name
                            symbols.setdefault(name, f"import {source}:{alias.name}")
            found[pyread.module_of(path)] = dict(sorted(symbols.items()))
    return found


def _resolve_import(found: dict[str, dict[str, str]], module: str, name: str) -> str | None:
    """What an imported name is: its definition's record, followed through re-exports; "value"
    for a submodule; None for a name from outside vLLM (left out: typing, torch, ...)."""
    for _ in range(12):
        if module not in found:
            return None
        record = found[module].get(name)
        if record is None:
            return "value" if f"{module}.{name}" in found else None
        if not record.startswith("import "):
            return record
        module, _, name = record.removeprefix("import ").partition(":")
    return None


def _patch_targets(wheel: Wheel) -> dict[str, dict[str, str]]:
    """Parsed on every core, and cached per wheel (a wheel's name says its contents) and per
    version of the code above (its source is in the key), since it parses every file."""
    import hashlib
    import inspect
    import json
    from concurrent.futures import ProcessPoolExecutor

    from tools.wheelsrc import cache_root

    parts = (signature_text, _field_without_default, _symbols, _runtime_statements, _symbols_of)
    parts += (_resolve_import,)
    code = "".join(inspect.getsource(f) for f in parts)
    key = hashlib.sha256(f"{wheel.path.name}\0{code}".encode()).hexdigest()[:16]
    cached = cache_root() / "patch-targets" / f"{wheel.path.name}-{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    paths = wheel.py_files()
    workers = max(1, min(8, os.cpu_count() or 1))
    chunks = [paths[i :: workers * 4] for i in range(workers * 4)]
    found: dict[str, dict[str, str]] = {}
    with ProcessPoolExecutor(workers) as pool:
        for part in pool.map(_symbols_of, [str(wheel.path)] * len(chunks), chunks):
            found.update(part)
    resolved = {
        (module, name): _resolve_import(found, *record.removeprefix("import ").split(":"))
        for module, symbols in found.items()
        for name, record in symbols.items()
        if record.startswith("import ")
    }
    for (module, name), record in resolved.items():
        if record is None:
            del found[module][name]
        else:
            found[module][name] = record
    found = dict(sorted(found.items()))
    write_atomic(cached, json.dumps(found))
    return found


def patch_targets() -> Values:
    """Every symbol a patch may target, per vLLM module: {module: {qualname: what}}, where
    `what` is a function's signature_text, "class", "property" or "value" (an assignment).
    Top-level names and members of classes, two classes deep."""
    return lambda wheel: _memo(wheel, ("patch_targets",), lambda: _patch_targets(wheel))


# -- model configurations: vLLM's config registry and the transformers it requires ----------

CONFIGS = "vllm/transformers_utils/config.py"
AUTO = "transformers/models/auto"
CAUSAL_LM = "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"


def _requirement_floor(wheel: Wheel, project: str) -> str:
    """The lowest version of `project` the wheel's METADATA accepts (`Requires-Dist: x>=A`)."""
    import email.parser

    meta = email.parser.Parser().parsestr(wheel.metadata())
    name = rf"{re.escape(project)}(?![A-Za-z0-9_.-])\s*(?:\[[^]]*\])?\s*([^;]*)"
    for line in meta.get_all("Requires-Dist") or []:
        m = re.match(name, line, re.IGNORECASE)
        floor = re.search(r">=\s*([0-9][^,\s]*)", m.group(1)) if m else None
        if floor:
            return floor.group(1)
    raise FactsError(f"{wheel.label}: METADATA has no `Requires-Dist: {project}>=...`")


def requirement_wheel(wheel: Wheel, project: str) -> Wheel:
    """The wheel of `project` (e.g. transformers) at the lowest version vLLM's wheel accepts:
    what every environment of the target has at least (a newer one can only know more)."""
    from tools.wheelsrc import load_wheel, wheel_for_spec

    spec = f"{project}=={_requirement_floor(wheel, project)}"
    return _memo(wheel, ("requirement", spec), lambda: load_wheel(wheel_for_spec(spec)))


def _is_update_of(stmt: ast.stmt, var: str) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    f = stmt.value.func
    return isinstance(f, ast.Attribute) and f.attr == "update" and ast.unparse(f.value) == var


def _string_pairs(tree: ast.Module, var: str) -> dict[str, str]:
    """{key: value} of the string pairs a module puts in `var`: the ("a", "B") tuples,
    {"a": "B"} items and a="B" keywords of its assignments and `var.update(...)` calls."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        value: ast.AST | None = None
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == var for t in targets):
                value = stmt.value
        elif _is_update_of(stmt, var):
            value = stmt
        for node in ast.walk(value) if value is not None else []:
            pairs: list[tuple[ast.AST | None, ast.AST]] = []
            if isinstance(node, ast.Tuple) and len(node.elts) == 2:
                pairs = [(node.elts[0], node.elts[1])]
            elif isinstance(node, ast.Dict):
                pairs = list(zip(node.keys, node.values, strict=True))
            elif isinstance(node, ast.Call):
                pairs = [(ast.Constant(k.arg), k.value) for k in node.keywords if k.arg]
            for k, v in pairs:
                key, val = getattr(k, "value", None), getattr(v, "value", None)
                if isinstance(key, str) and isinstance(val, str):
                    out[key] = val
    return out


def _config_names(hf: Wheel) -> dict[str, str]:
    """transformers' CONFIG_MAPPING_NAMES (model type -> configuration class name): generated
    into auto_mappings.py by newer releases, then updated in configuration_auto.py."""
    names: dict[str, str] = {}
    for path in (f"{AUTO}/auto_mappings.py", f"{AUTO}/configuration_auto.py"):
        if hf.has(path):
            names.update(_string_pairs(hf.tree(path), "CONFIG_MAPPING_NAMES"))
    return names


def model_types() -> Values:
    """Every config.json `model_type` a checkpoint can already name: the keys of vLLM's
    _CONFIG_REGISTRY and of transformers' CONFIG_MAPPING_NAMES (at vLLM's lowest transformers)."""

    def run(wheel: Wheel) -> list[str]:
        vllm = _string_pairs(wheel.tree(CONFIGS), "_CONFIG_REGISTRY")
        names = _config_names(requirement_wheel(wheel, "transformers"))
        if not vllm or not names:
            raise FactsError("no model types found in _CONFIG_REGISTRY or CONFIG_MAPPING_NAMES")
        return sorted(set(vllm) | set(names))

    return run


def config_registry() -> Values:
    """The model types vLLM reads through its own _CONFIG_REGISTRY, before transformers'
    AutoConfig is asked (vllm/transformers_utils/config.py): a plugin cannot replace them there."""

    def run(wheel: Wheel) -> list[str]:
        names = _string_pairs(wheel.tree(CONFIGS), "_CONFIG_REGISTRY")
        if not names:
            raise FactsError(f"{CONFIGS}: no _CONFIG_REGISTRY entries")
        return sorted(names)

    return run


def base_configs(*tables: Values) -> Values:
    """{architecture: "transformers:Config"} for the architectures of `tables` (vLLM's model
    families) whose configuration transformers builds: one transformers has a model class of
    that name for (its modeling_auto mappings, causal LM first) takes the configuration class
    of that model type; an EAGLE draft vLLM names after another architecture ("Eagle", "Eagle3"
    or "DFlash" + ARCH, or ARCH + "Eagle3": EAGLEConfig reads the draft checkpoint's config.json
    as ARCH's) takes ARCH's. The configuration a new model type on that base starts from."""

    def run(wheel: Wheel) -> dict[str, str]:
        hf = requirement_wheel(wheel, "transformers")
        configs = _config_names(hf)
        tree = hf.tree(f"{AUTO}/modeling_auto.py")
        mappings = [
            t.id
            for stmt in tree.body
            if isinstance(stmt, ast.Assign)
            for t in stmt.targets
            if isinstance(t, ast.Name) and re.fullmatch(r"MODEL_(FOR_\w+_)?MAPPING_NAMES", t.id)
        ]
        named: dict[str, str] = {}
        for var in [CAUSAL_LM, *mappings]:
            for model_type, arch in _string_pairs(tree, var).items():
                if model_type in configs:
                    named.setdefault(arch, f"transformers:{configs[model_type]}")
        out: dict[str, str] = {}
        for arch in sorted({a for table in tables for a in table(wheel)}):
            stems = [arch] + [arch[len(p) :] for p in DRAFT_PREFIXES if arch.startswith(p)]
            stems += [arch[: -len(s)] for s in DRAFT_SUFFIXES if arch.endswith(s)]
            config = next((named[s] for s in stems if s in named), None)
            if config:
                out[arch] = config
        return out

    return run


# The names vLLM's EAGLEConfig gives a draft after the architecture its checkpoint names
# (vllm/transformers_utils/configs/eagle.py): "Eagle" + ARCH, "Eagle3" + ARCH or ARCH + "Eagle3",
# "DFlash" + ARCH or ARCH + "DFlash" (longest first).
DRAFT_PREFIXES = ("Eagle3", "Eagle", "DFlash")
DRAFT_SUFFIXES = ("Eagle3", "DFlash")


def module_class_maps(path: str, variables: tuple[str, ...], package: str) -> Values:
    """module_class_map of several tables merged (those the file has; one at least), first wins."""

    def run(wheel: Wheel) -> dict[str, str]:
        out: dict[str, str] = {}
        found = False
        for var in variables:
            try:
                table = module_class_map(path, var, package)(wheel)
            except FactsError:
                continue
            found = True
            out = {**table, **out}
        if not found:
            raise FactsError(f"{path}: none of {', '.join(variables)}")
        return dict(sorted(out.items()))

    return run
