"""A small static evaluator for SGLang's source: names and constant expressions resolved from the AST.

Names are resolved through module-level assignments, ``from … import`` bindings, class attributes,
enum members and small helper functions, without importing sglang or torch; whatever exists only at
run time raises :class:`Unresolved`, which the extractor records as ``choices_dynamic``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

from deployctl.errors import InputError
from deployctl.preflight.sources import SourceTree

_CONTAINERS: dict[str, Any] = {"list": list, "tuple": tuple, "sorted": lambda items: sorted(items, key=str),
                                "set": set, "frozenset": set}


class Unresolved(Exception):
    """A name or expression whose value only exists at run time."""


@dataclass(frozen=True)
class ClassRef:
    module: str
    node: ast.ClassDef

    @property
    def is_enum(self) -> bool:
        return any(ast.unparse(b).split(".")[-1].endswith(("Enum", "Flag")) for b in self.node.bases)


@dataclass(frozen=True)
class _FuncRef:
    module: str
    node: ast.FunctionDef


@dataclass(frozen=True)
class EnumMember:
    name: str
    value: Any


class Modules:
    """Parsed modules of one source tree, and a small evaluator for constant expressions in them."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self._cache: dict[str, ast.Module | None] = {}

    def module(self, dotted: str) -> ast.Module | None:
        if dotted not in self._cache:
            base = dotted.replace(".", "/")
            text = self.tree.read(f"{base}.py")
            if text is None:
                text = self.tree.read(f"{base}/__init__.py")
            self._cache[dotted] = None if text is None else ast.parse(text)
        return self._cache[dotted]

    def require(self, dotted: str) -> ast.Module:
        module = self.module(dotted)
        if module is None:
            raise InputError(
                f"{dotted.replace('.', '/')}.py is missing from {self.tree.describe()}",
                hint="point the deployment at a complete SGLang installation",
            )
        return module

    # -- name binding -------------------------------------------------------------------------
    def lookup(self, module: str, name: str, depth: int = 0) -> Any:
        if depth > 8:
            raise Unresolved(name)
        tree = self.module(module)
        if tree is None:
            raise Unresolved(name)
        binding: Any = None
        for stmt in tree.body:
            found = self._binding_in(stmt, module, name)
            if found is not None:
                binding = found
        if binding is None:
            raise Unresolved(name)
        kind, payload = binding
        if kind == "value":
            return self.value(payload, module)
        if kind == "import":
            return self.lookup(payload[0], payload[1], depth + 1)
        return payload

    def _binding_in(self, stmt: ast.stmt, module: str, name: str) -> tuple[str, Any] | None:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return ("value", stmt.value)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return ("value", stmt.value) if stmt.value is not None else None
        if isinstance(stmt, ast.ClassDef) and stmt.name == name:
            return ("ref", ClassRef(module, stmt))
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return ("ref", _FuncRef(module, stmt))
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    return ("import", (self._absolute(module, stmt), alias.name))
        if isinstance(stmt, ast.Try):
            for inner in stmt.body:
                found = self._binding_in(inner, module, name)
                if found is not None:
                    return found
        return None

    def _absolute(self, module: str, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        is_package = self.tree.read(module.replace(".", "/") + "/__init__.py") is not None
        parts = module.split(".")
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - (stmt.level - 1)]
        return ".".join(base + ([stmt.module] if stmt.module else []))

    def class_attr(self, ref: ClassRef, attr: str) -> Any:
        scope: dict[str, ast.expr] = {}
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        scope[target.id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                scope[stmt.target.id] = stmt.value
        if attr not in scope:
            raise Unresolved(attr)
        env = {k: Lazy(lambda v=v: self.value(v, ref.module)) for k, v in scope.items() if k != attr}
        return self.value(scope[attr], ref.module, env)

    def enum_members(self, ref: ClassRef) -> list[EnumMember]:
        members = []
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if not name.startswith("_"):
                    try:
                        members.append(EnumMember(name, self.value(stmt.value, ref.module)))
                    except Unresolved:
                        members.append(EnumMember(name, None))
        return members

    # -- evaluation ---------------------------------------------------------------------------
    def value(self, node: ast.expr | None, module: str, env: dict[str, Any] | None = None) -> Any:
        env = env or {}
        if node is None:
            raise Unresolved("missing")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self._iterate(self.value(elt.value, module, env)))
                else:
                    out.append(self.value(elt, module, env))
            return tuple(out) if isinstance(node, ast.Tuple) else set(out) if isinstance(node, ast.Set) else out
        if isinstance(node, ast.Dict):
            return {self.value(k, module, env): self._maybe(v, module, env) for k, v in zip(node.keys, node.values)
                    if k is not None}
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
            left, right = self.value(node.left, module, env), self.value(node.right, module, env)
            if isinstance(left, set) or isinstance(right, set):
                return set(self._iterate(left)) | set(self._iterate(right))
            return list(self._iterate(left)) + list(self._iterate(right))
        if isinstance(node, ast.Name):
            if node.id in env:
                bound = env[node.id]
                return bound.get() if isinstance(bound, Lazy) else bound
            return self.lookup(module, node.id)
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, module, env)
            if isinstance(base, ClassRef):
                return self.class_attr(base, node.attr)
            if isinstance(base, EnumMember) and node.attr in ("name", "value"):
                return getattr(base, node.attr)
            raise Unresolved(ast.unparse(node))
        if isinstance(node, ast.Call):
            return self._call(node, module, env)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1 and not node.generators[0].ifs:
            gen = node.generators[0]
            if not isinstance(gen.target, ast.Name):
                raise Unresolved(ast.unparse(node))
            items = self._iterate(self.value(gen.iter, module, env))
            return [self.value(node.elt, module, {**env, gen.target.id: item}) for item in items]
        raise Unresolved(ast.unparse(node))

    def _maybe(self, node: ast.expr, module: str, env: dict[str, Any]) -> Any:
        try:
            return self.value(node, module, env)
        except Unresolved:
            return None

    def _call(self, node: ast.Call, module: str, env: dict[str, Any]) -> Any:
        func = node.func
        if isinstance(func, ast.Name) and func.id in _CONTAINERS and len(node.args) == 1:
            items = list(self._iterate(self.value(node.args[0], module, env)))
            return _CONTAINERS[func.id](items)
        if isinstance(func, ast.Attribute) and not node.args:
            base = self.value(func.value, module, env)
            if func.attr == "keys" and isinstance(base, dict):
                return list(base)
            if func.attr in ("lower", "upper") and isinstance(base, str):
                return getattr(base, func.attr)()
        if isinstance(func, ast.Name) and not node.args:
            target = self.value(func, module, env)
            if isinstance(target, _FuncRef):
                return self._function_result(target)
        raise Unresolved(ast.unparse(node))

    def _function_result(self, ref: _FuncRef) -> Any:
        """A helper like ``_tool_call_parser_choices()``: the first ``return`` that resolves statically."""
        # Function-local ``from x import NAME`` statements bind names for its return statements.
        env: dict[str, Any] = {}
        for stmt in ast.walk(ref.node):
            if isinstance(stmt, ast.ImportFrom):
                source = self._absolute(ref.module, stmt)
                for alias in stmt.names:
                    env[alias.asname or alias.name] = Lazy(
                        lambda source=source, name=alias.name: self.lookup(source, name))
        for stmt in ast.walk(ref.node):
            if isinstance(stmt, ast.Return):
                try:
                    return self.value(stmt.value, ref.module, env)
                except Unresolved:
                    continue
        raise Unresolved(ref.node.name)

    def _iterate(self, value: Any) -> list[Any]:
        if isinstance(value, ClassRef):
            if not value.is_enum:
                raise Unresolved(value.node.name)
            return list(self.enum_members(value))
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, (set, frozenset)):
            return sorted(value, key=str)
        if isinstance(value, (list, tuple)):
            return list(value)
        raise Unresolved(repr(value))


class Lazy:
    """A name bound to something evaluated only if it is used (most bindings never are)."""

    def __init__(self, thunk: Callable[[], Any]) -> None:
        self.thunk = thunk

    def get(self) -> Any:
        return self.thunk()
