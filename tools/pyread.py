"""Small, pure helpers over Python ASTs: symbols, signatures, decorators, literal values.

Nothing here imports or executes the code it reads; values are computed by a tiny evaluator
that understands the literals vLLM builds its tables from (dicts merged with `**`, filtered
comprehensions, `Literal[...]`), and nothing else.
"""

from __future__ import annotations

import ast
import contextlib
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Unreadable(Exception):
    """An expression the evaluator does not understand (a call, an attribute of a module...)."""


@dataclass(frozen=True)
class Opaque:
    """A name that is not a literal (a class, a function): kept as its name, e.g. in lists."""

    name: str


@dataclass(frozen=True)
class LiteralType:
    """`typing.Literal[...]`: the evaluator's value for `Literal["a", "b"]` is its members."""

    values: tuple[object, ...]


def flatten(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a module or class body, looking into if/try/with blocks but not defs."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from flatten(stmt.body)
            yield from flatten(stmt.orelse)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            yield from flatten(stmt.body)
            for handler in stmt.handlers:
                yield from flatten(handler.body)
            yield from flatten(stmt.orelse)
            yield from flatten(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from flatten(stmt.body)
        else:
            yield stmt


def assigned_names(stmt: ast.stmt) -> list[str]:
    """Names a statement binds with `=` or an annotated assignment that has a value."""
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if (
        isinstance(stmt, ast.AnnAssign)
        and stmt.value is not None
        and isinstance(stmt.target, ast.Name)
    ):
        return [stmt.target.id]
    return []


def _is_accessor(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    # `@x.setter` / `@x.deleter` re-define a property's name: the getter is the member.
    return any(
        isinstance(d, ast.Attribute) and d.attr in {"setter", "deleter"} for d in fn.decorator_list
    )


def members(body: list[ast.stmt], annotations: bool = False) -> dict[str, ast.AST]:
    """name -> defining node for a module or class body (functions, classes, assignments).
    `annotations` adds bare `x: T` declarations (dataclass fields without a default), which
    are symbols a fact may name but not attributes the class object has."""
    found: dict[str, ast.AST] = {}
    for stmt in flatten(body):
        if annotations and isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            found.setdefault(stmt.target.id, stmt)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if not (_is_accessor(stmt) and stmt.name in found):
                found.setdefault(stmt.name, stmt)
        elif isinstance(stmt, ast.ClassDef):
            found[stmt.name] = stmt
        else:
            for name in assigned_names(stmt):
                found[name] = stmt
    return found


def class_members(cls: ast.ClassDef) -> dict[str, ast.AST]:
    return members(cls.body)


def find_symbol(tree: ast.Module, dotted: str) -> ast.AST | None:
    """The node defining `A.b.c` (a dotted qualname) in a module, or None."""
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in dotted.split("."):
        node = members(body, annotations=True).get(part)
        if node is None:
            return None
        body = node.body if isinstance(node, ast.ClassDef) else []
    return node


def qualnames(tree: ast.Module) -> list[str]:
    """Every dotted qualname find_symbol can reach: used to guess what a missing symbol became."""
    out: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for name, node in members(body, annotations=True).items():
            out.append(prefix + name)
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{name}.")

    visit(tree.body, "")
    return out


def _arguments(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
) -> list[tuple[str, ast.arg, ast.expr | None]]:
    """(star, parameter, default) in the order Python binds them; the one walk of a def's
    parameters that `params` and `signature` share."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    out = [("", p, d) for p, d in zip(positional, defaults + list(a.defaults), strict=True)]
    if a.vararg:
        out.append(("*", a.vararg, None))
    out += [("", p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        out.append(("**", a.kwarg, None))
    return out


def params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Parameter names in order; `*args` and `**kwargs` keep their stars."""
    return [star + arg.arg for star, arg, _ in _arguments(fn)]


def signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Each parameter as written, with its annotation and default (`name: int = 0`), then the
    return annotation (`-> T`): what `params` leaves out, so a changed type or default is seen."""
    out = []
    for star, arg, default in _arguments(fn):
        text = star + arg.arg
        if arg.annotation is not None:
            text += ": " + ast.unparse(arg.annotation)
        if default is not None:
            text += " = " + ast.unparse(default)
        out.append(text)
    if fn.returns is not None:
        out.append("-> " + ast.unparse(fn.returns))
    return out


def body_text(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A function's body, normalised: unparsed from the AST (so formatting and comments do not
    count) without its docstring. Two releases whose bodies differ here behave differently or
    were rewritten; either way a maintainer reads the diff."""
    body = fn.body[1:] if ast.get_docstring(fn, clean=False) is not None else fn.body
    return "\n".join(ast.unparse(stmt) for stmt in body)


def decorator_names(node: ast.AST) -> list[str]:
    """Dotted names of a def's decorators, calls reduced to what is called."""
    out = []
    for dec in getattr(node, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        out.append(dotted_name(target) or "")
    return out


def is_abstract(node: ast.AST) -> bool:
    return any(
        d.split(".")[-1] in {"abstractmethod", "abstractproperty"} for d in decorator_names(node)
    )


def dotted_name(expr: ast.expr) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = dotted_name(expr.value)
        return f"{head}.{expr.attr}" if head else None
    return None


def base_name(expr: ast.expr) -> str | None:
    """The class a base expression names: `Base`, `Base[T]` (Generic subscripts) -> `Base`."""
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def module_binding(tree: ast.Module, name: str) -> ast.AST | tuple[str, str] | None:
    """What binds `name` at module level: a def/class node, `(module, original)` for an import
    (`module` keeps its leading dots when relative), an ast.Name for `X = Y`, else None."""
    found: ast.AST | tuple[str, str] | None = None
    for stmt in flatten(tree.body):
        if (
            isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and stmt.name == name
        ):
            found = stmt
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    found = ("." * stmt.level + (stmt.module or ""), alias.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and name in assigned_names(stmt):
            found = stmt.value if isinstance(stmt.value, ast.Name) else stmt
    return found


def absolute_module(path: str, module: str) -> str:
    """Resolve a possibly relative module (`..x`) against the file `path` that imports it."""
    level = len(module) - len(module.lstrip("."))
    if not level:
        return module
    package = path.removesuffix(".py").split("/")
    package = package[:-1]  # a module's package; for `pkg/__init__.py` that is `pkg`
    package = package[: len(package) - (level - 1)]
    rest = module[level:]
    return ".".join(package + ([rest] if rest else []))


def module_of(path: str) -> str:
    """`vllm/a/b.py` -> `vllm.a.b`; `vllm/a/__init__.py` -> `vllm.a`."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imported_from(tree: ast.Module, module: str) -> dict[str, str]:
    """local name -> original name for every `from <module> import ...` in a file (any depth)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == module:
            for alias in node.names:
                out[alias.asname or alias.name] = alias.name
    return out


def imported_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by `import a.b` (binds `a`) and `import a.b as c`."""
    out = set()
    for stmt in flatten(tree.body):
        if isinstance(stmt, ast.Import):
            out |= {alias.asname or alias.name.split(".")[0] for alias in stmt.names}
        elif isinstance(stmt, ast.ImportFrom):
            out |= {alias.asname or alias.name for alias in stmt.names}
    return out


def has_getattr(tree: ast.Module) -> bool:
    """A module-level `def __getattr__` (PEP 562): the module may serve names lazily."""
    return any(
        isinstance(s, ast.FunctionDef) and s.name == "__getattr__" for s in flatten(tree.body)
    )


def _lazy_tables(tree: ast.Module) -> Iterator[tuple[str, object]]:
    # Every string-keyed pair of every module-level dict literal: vLLM's lazy re-export tables
    # (`MODULE_ATTRS`, `_CLASS_TO_MODULE`, ...) are such dicts, read by `__getattr__`.
    evaluator = Evaluator(tree)
    for stmt in flatten(tree.body):
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    try:
                        yield key.value, evaluator.eval(item, {})
                    except Unreadable:
                        yield key.value, None


def lazy_names(tree: ast.Module) -> set[str]:
    """Names a module's `__getattr__` may serve: lazy-table keys, `__all__`, and the strings it
    compares `name` with."""
    names = {key for key, _ in _lazy_tables(tree)}
    with contextlib.suppress(Unreadable, TypeError):  # no `__all__`, or not a literal list
        names |= {str(n) for n in Evaluator(tree).lookup("__all__")}  # type: ignore[attr-defined]
    for stmt in flatten(tree.body):
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            names |= {
                n.value
                for n in ast.walk(stmt)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and n.value.isidentifier()
            }
    return names


def lazy_export(tree: ast.Module, name: str) -> tuple[str, str] | None:
    """(module, attr) that a lazy table maps `name` to: `"mod:attr"`, `"mod"` (attr = name) or
    `("mod", "attr")`; None when the module has no `__getattr__` or no such entry."""
    if not has_getattr(tree):
        return None
    for key, value in _lazy_tables(tree):
        if key != name:
            continue
        if isinstance(value, str):
            module, _, attr = value.partition(":")
            return module, attr or name
        if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return value[0], value[1]
    return None


def first_str_arg(call: ast.Call, keyword: str | None = None) -> str | None:
    """The first positional argument (or `keyword=`) of a call when it is a string literal."""
    arg: ast.expr | None = call.args[0] if call.args else None
    if arg is None and keyword:
        arg = next((k.value for k in call.keywords if k.arg == keyword), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


# -- literal evaluation ---------------------------------------------------------------------

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.BitOr: operator.or_,
    ast.Sub: operator.sub,
}
_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "dict": dict,
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "sorted": sorted,
}


class Evaluator:
    """Evaluates module constants built from literals, without running the module."""

    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree
        self._cache: dict[str, object] = {}
        self._busy: set[str] = set()

    def lookup(self, name: str) -> object:
        """The value of module-level `name`; non-literal bindings become Opaque(name)."""
        if name in self._cache:
            return self._cache[name]
        if name in self._busy:
            raise Unreadable(f"{name} refers to itself")
        binding = module_binding(self._tree, name)
        if binding is None:
            raise Unreadable(f"no module-level name {name}")
        self._busy.add(name)
        try:
            if isinstance(binding, ast.Assign | ast.AnnAssign):
                value = self.eval(binding.value, {})  # type: ignore[arg-type]
            elif isinstance(binding, ast.Name):
                value = self.eval(binding, {})
            else:
                value = Opaque(name)
        finally:
            self._busy.discard(name)
        self._cache[name] = value
        return value

    def eval(self, node: ast.expr, scope: dict[str, object]) -> Any:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            raise Unreadable(f"cannot evaluate {ast.unparse(node)[:80]}")
        return method(node, scope)

    def _eval_Constant(self, node: ast.Constant, scope: dict[str, object]) -> Any:
        return node.value

    def _eval_Name(self, node: ast.Name, scope: dict[str, object]) -> Any:
        if node.id in scope:
            return scope[node.id]
        if node.id in {"True", "False", "None"}:
            return {"True": True, "False": False, "None": None}[node.id]
        try:
            return self.lookup(node.id)
        except Unreadable:
            return Opaque(node.id)  # a builtin or an import: not a literal, but nameable

    def _eval_Attribute(self, node: ast.Attribute, scope: dict[str, object]) -> Any:
        return Opaque(dotted_name(node) or node.attr)

    def _eval_Tuple(self, node: ast.Tuple, scope: dict[str, object]) -> Any:
        return tuple(self._elements(node.elts, scope))

    def _eval_List(self, node: ast.List, scope: dict[str, object]) -> Any:
        return list(self._elements(node.elts, scope))

    def _eval_Set(self, node: ast.Set, scope: dict[str, object]) -> Any:
        return set(self._elements(node.elts, scope))

    def _elements(self, elts: list[ast.expr], scope: dict[str, object]) -> Iterator[Any]:
        for elt in elts:
            if isinstance(elt, ast.Starred):
                yield from self.eval(elt.value, scope)
            else:
                yield self.eval(elt, scope)

    def _eval_Dict(self, node: ast.Dict, scope: dict[str, object]) -> Any:
        out: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # `**other`
                out.update(self.eval(value, scope))
            else:
                out[self.eval(key, scope)] = self.eval(value, scope)
        return out

    def _eval_Subscript(self, node: ast.Subscript, scope: dict[str, object]) -> Any:
        if dotted_name(node.value) in {"Literal", "typing.Literal"}:
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return LiteralType(tuple(self._literal_members(items, scope)))
        return self.eval(node.value, scope)[self.eval(node.slice, scope)]

    def _literal_members(self, items: list[ast.expr], scope: dict[str, object]) -> Iterator[object]:
        for item in items:
            value = self.eval(item, scope)
            yield from value.values if isinstance(value, LiteralType) else (value,)

    def _eval_BinOp(self, node: ast.BinOp, scope: dict[str, object]) -> Any:
        left, right = self.eval(node.left, scope), self.eval(node.right, scope)
        if isinstance(left, LiteralType) and isinstance(right, LiteralType):
            return LiteralType(left.values + right.values)  # Literal[...] | Literal[...]
        fn = _BINOPS.get(type(node.op))
        if fn is None:
            raise Unreadable(f"operator in {ast.unparse(node)[:80]}")
        return fn(left, right)

    def _eval_UnaryOp(self, node: ast.UnaryOp, scope: dict[str, object]) -> Any:
        value = self.eval(node.operand, scope)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub):
            return -value
        raise Unreadable(f"operator in {ast.unparse(node)[:80]}")

    def _eval_BoolOp(self, node: ast.BoolOp, scope: dict[str, object]) -> Any:
        values = [self.eval(v, scope) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)

    def _eval_Compare(self, node: ast.Compare, scope: dict[str, object]) -> Any:
        left = self.eval(node.left, scope)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, scope)
            fn = _CMPOPS.get(type(op))
            if fn is None or not fn(left, right):
                return False
            left = right
        return True

    def _eval_IfExp(self, node: ast.IfExp, scope: dict[str, object]) -> Any:
        return self.eval(node.body if self.eval(node.test, scope) else node.orelse, scope)

    def _eval_JoinedStr(self, node: ast.JoinedStr, scope: dict[str, object]) -> Any:
        parts = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else value
            parts.append(str(self.eval(inner, scope)))
        return "".join(parts)

    def _eval_Call(self, node: ast.Call, scope: dict[str, object]) -> Any:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in {"items", "keys", "values"}
            and not node.args
        ):
            return list(getattr(self.eval(func.value, scope), func.attr)())
        name = dotted_name(func)
        if name in _CONVERSIONS and len(node.args) <= 1 and not node.keywords:
            return (
                _CONVERSIONS[name](self.eval(node.args[0], scope))
                if node.args
                else _CONVERSIONS[name]([])
            )
        if name == "dict" and not node.args:
            return {k.arg: self.eval(k.value, scope) for k in node.keywords if k.arg}
        raise Unreadable(f"call {ast.unparse(node)[:80]}")

    def _comprehension(
        self, generators: list[ast.comprehension], scope: dict[str, object]
    ) -> Iterator[dict[str, object]]:
        # Yields one scope per iteration of nested `for ... if ...` clauses.
        if not generators:
            yield scope
            return
        first, rest = generators[0], generators[1:]
        for item in self.eval(first.iter, scope):
            inner = dict(scope)
            _bind(first.target, item, inner)
            if all(self.eval(cond, inner) for cond in first.ifs):
                yield from self._comprehension(rest, inner)

    def _eval_DictComp(self, node: ast.DictComp, scope: dict[str, object]) -> Any:
        return {
            self.eval(node.key, s): self.eval(node.value, s)
            for s in self._comprehension(node.generators, scope)
        }

    def _eval_ListComp(self, node: ast.ListComp, scope: dict[str, object]) -> Any:
        return [self.eval(node.elt, s) for s in self._comprehension(node.generators, scope)]

    def _eval_SetComp(self, node: ast.SetComp, scope: dict[str, object]) -> Any:
        return {self.eval(node.elt, s) for s in self._comprehension(node.generators, scope)}


def _bind(target: ast.expr, value: object, scope: dict[str, object]) -> None:
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, ast.Tuple | ast.List):
        for sub, item in zip(target.elts, value, strict=True):  # type: ignore[call-overload]
            _bind(sub, item, scope)
    else:
        raise Unreadable(f"comprehension target {ast.unparse(target)}")


def plain(value: object) -> object:
    """A JSON/YAML-comparable form: tuples and sets become lists, Opaque its name."""
    if isinstance(value, Opaque):
        return value.name
    if isinstance(value, LiteralType):
        return [plain(v) for v in value.values]
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value
