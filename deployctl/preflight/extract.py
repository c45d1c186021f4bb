"""Rebuild SGLang's command-line flag table from its source, without importing sglang or torch.

Two generations of SGLang define their flags differently (``sglang-flag-facts.md`` §5):

* up to 0.5.11, ``ServerArgs.add_cli_args`` is a list of literal ``parser.add_argument("--x", …)``
  calls; choices are module-level lists, two come from parser registries (``DetectorMap``,
  ``ToolCallParserEnum``);
* from 0.5.23, ``ServerArgs`` is a ``msgspec.defstruct`` assembled from namespace Structs in
  ``arg_groups/fields/*.py`` whose fields are annotated ``A[T, "help"]`` or ``A[T, Arg(...)]``;
  ``arg_utils.add_cli_args_from_dataclass`` turns them into arguments (Literal → choices, bool →
  ``store_true``, ``List`` → ``nargs="+"``), and ``add_cli_args`` adds a handful by hand.

Both are read from the AST. Names are resolved through module-level assignments, ``from … import``
bindings, class attributes, enum members and small helper functions; whatever cannot be resolved
statically (choices added by plugins at run time) is recorded as ``choices_dynamic``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Callable

from deployctl.errors import InputError
from deployctl.preflight.flagtable import FlagSpec, FlagTable, Nargs
from deployctl.preflight.sources import SourceTree

SERVER_ARGS = "sglang.srt.server_args"
FIELDS_PACKAGE = "sglang/srt/arg_groups/fields"

_SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
_TYPE_NAMES = {"str": "str", "int": "int", "float": "float", "json.loads": "json", "loads": "json"}
_DEPRECATION_HINT = re.compile(r"[Uu]se (--[\w-]+(?:[ =][\w{},<>-]+)?)")


_CONTAINERS: dict[str, Any] = {"list": list, "tuple": tuple, "sorted": lambda items: sorted(items, key=str),
                                "set": set, "frozenset": set}


class _Unresolved(Exception):
    """A name or expression whose value only exists at run time."""


@dataclass(frozen=True)
class _ClassRef:
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
class _EnumMember:
    name: str
    value: Any


class _Modules:
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
            raise _Unresolved(name)
        tree = self.module(module)
        if tree is None:
            raise _Unresolved(name)
        binding: Any = None
        for stmt in tree.body:
            found = self._binding_in(stmt, module, name)
            if found is not None:
                binding = found
        if binding is None:
            raise _Unresolved(name)
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
            return ("ref", _ClassRef(module, stmt))
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

    def class_attr(self, ref: _ClassRef, attr: str) -> Any:
        scope: dict[str, ast.expr] = {}
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        scope[target.id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                scope[stmt.target.id] = stmt.value
        if attr not in scope:
            raise _Unresolved(attr)
        env = {k: _Lazy(lambda v=v: self.value(v, ref.module)) for k, v in scope.items() if k != attr}
        return self.value(scope[attr], ref.module, env)

    def enum_members(self, ref: _ClassRef) -> list[_EnumMember]:
        members = []
        for stmt in ref.node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if not name.startswith("_"):
                    try:
                        members.append(_EnumMember(name, self.value(stmt.value, ref.module)))
                    except _Unresolved:
                        members.append(_EnumMember(name, None))
        return members

    # -- evaluation ---------------------------------------------------------------------------
    def value(self, node: ast.expr | None, module: str, env: dict[str, Any] | None = None) -> Any:
        env = env or {}
        if node is None:
            raise _Unresolved("missing")
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
                return bound.get() if isinstance(bound, _Lazy) else bound
            return self.lookup(module, node.id)
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, module, env)
            if isinstance(base, _ClassRef):
                return self.class_attr(base, node.attr)
            if isinstance(base, _EnumMember) and node.attr in ("name", "value"):
                return getattr(base, node.attr)
            raise _Unresolved(ast.unparse(node))
        if isinstance(node, ast.Call):
            return self._call(node, module, env)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1 and not node.generators[0].ifs:
            gen = node.generators[0]
            if not isinstance(gen.target, ast.Name):
                raise _Unresolved(ast.unparse(node))
            items = self._iterate(self.value(gen.iter, module, env))
            return [self.value(node.elt, module, {**env, gen.target.id: item}) for item in items]
        raise _Unresolved(ast.unparse(node))

    def _maybe(self, node: ast.expr, module: str, env: dict[str, Any]) -> Any:
        try:
            return self.value(node, module, env)
        except _Unresolved:
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
        raise _Unresolved(ast.unparse(node))

    def _function_result(self, ref: _FuncRef) -> Any:
        """A helper like ``_tool_call_parser_choices()``: the first ``return`` that resolves statically."""
        # Function-local ``from x import NAME`` statements bind names for its return statements.
        env: dict[str, Any] = {}
        for stmt in ast.walk(ref.node):
            if isinstance(stmt, ast.ImportFrom):
                source = self._absolute(ref.module, stmt)
                for alias in stmt.names:
                    env[alias.asname or alias.name] = _Lazy(
                        lambda source=source, name=alias.name: self.lookup(source, name))
        for stmt in ast.walk(ref.node):
            if isinstance(stmt, ast.Return):
                try:
                    return self.value(stmt.value, ref.module, env)
                except _Unresolved:
                    continue
        raise _Unresolved(ref.node.name)

    def _iterate(self, value: Any) -> list[Any]:
        if isinstance(value, _ClassRef):
            if not value.is_enum:
                raise _Unresolved(value.node.name)
            return list(self.enum_members(value))
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, (set, frozenset)):
            return sorted(value, key=str)
        if isinstance(value, (list, tuple)):
            return list(value)
        raise _Unresolved(repr(value))


class _Lazy:
    """A name bound to something evaluated only if it is used (most bindings never are)."""

    def __init__(self, thunk: Callable[[], Any]) -> None:
        self.thunk = thunk

    def get(self) -> Any:
        return self.thunk()


# ---------------------------------------------------------------------------------------------
# Turning add_argument calls and annotated fields into FlagSpecs
# ---------------------------------------------------------------------------------------------


def _action_name(node: ast.expr | None) -> str:
    if node is None:
        return "store"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node).split(".")[-1]


def _default_nargs(modules: _Modules, action: str, module: str) -> Nargs:
    if action in _SWITCH_ACTIONS or action == "BooleanOptionalAction":
        return 0
    try:
        ref = modules.lookup(module, action)
    except _Unresolved:
        return None
    if isinstance(ref, _ClassRef):
        for stmt in ref.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                args = stmt.args
                positional = args.posonlyargs + args.args
                defaults = dict(zip([a.arg for a in positional][-len(args.defaults):], args.defaults)) if args.defaults else {}
                defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
                if "nargs" in defaults:
                    try:
                        return modules.value(defaults["nargs"], ref.module)
                    except _Unresolved:
                        return None
    return None


def _type_name(node: ast.expr | None) -> str:
    if node is None:
        return "str"
    text = ast.unparse(node)
    return _TYPE_NAMES.get(text, text.split(".")[-1])


def _deprecation(action: str, new_flag: str | None, help_text: str | None) -> str | None:
    if action.startswith("Deprecated"):
        return new_flag or ""
    if help_text and re.match(r"\W*Deprecated", help_text):
        hint = _DEPRECATION_HINT.search(help_text)
        return hint.group(1) if hint else ""
    return None


def _option_strings(names: list[str], action: str) -> tuple[str, ...]:
    if action != "BooleanOptionalAction":
        return tuple(names)
    out: list[str] = []
    for name in names:
        out.append(name)
        if name.startswith("--"):
            out.append("--no-" + name[2:])
    return tuple(out)


def _dest(names: list[str], explicit: str | None) -> str:
    if explicit:
        return explicit
    long = next((n for n in names if n.startswith("--")), names[0])
    return long.lstrip("-").replace("-", "_")


def _choices(modules: _Modules, node: ast.expr | None, module: str, env: dict[str, Any]) -> tuple[tuple | None, bool]:
    if node is None:
        return None, False
    try:
        value = modules.value(node, module, env)
        items = modules._iterate(value)
        return tuple(i.value if isinstance(i, _EnumMember) else i for i in items), False
    except _Unresolved:
        return None, True


def _spec_from_call(modules: _Modules, call: ast.Call, module: str, env: dict[str, Any]) -> FlagSpec | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not names[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = _action_name(kw.get("action"))
    nargs: Nargs
    if "nargs" in kw:
        try:
            nargs = modules.value(kw["nargs"], module, env)
        except _Unresolved:
            nargs = "*"
    else:
        nargs = _default_nargs(modules, action, module)
    choices, dynamic = _choices(modules, kw.get("choices"), module, env)
    return FlagSpec(
        option_strings=_option_strings(names, action),
        dest=_dest(names, _const_str(kw.get("dest"))),
        action=action,
        nargs=nargs,
        value_type=_type_name(kw.get("type")) if nargs != 0 else "str",
        choices=choices,
        choices_dynamic=dynamic,
        required=_const_bool(kw.get("required")),
        deprecated=_deprecation(action, _const_str(kw.get("new_flag")), _const_str(kw.get("help"))),
    )


def _const_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _const_bool(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _add_argument_specs(
    modules: _Modules, function: ast.FunctionDef, module: str, expand: Any
) -> list[FlagSpec]:
    """Walk ``add_cli_args`` in order: local assignments bind names, ``add_argument`` calls add flags."""
    env: dict[str, Any] = {}
    specs: list[FlagSpec] = []
    for stmt in function.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = _Lazy(lambda value=stmt.value: modules.value(value, module))
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        callee = ast.unparse(call.func)
        if callee.endswith(".add_argument"):
            spec = _spec_from_call(modules, call, module, env)
            if spec is not None:
                specs.append(spec)
        elif callee.endswith("add_cli_args_from_dataclass"):
            specs.extend(expand())
    return specs


def _find_function(tree: ast.Module, class_name: str | None, name: str) -> ast.FunctionDef | None:
    scope: list[ast.stmt] = tree.body
    if class_name is not None:
        cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == class_name), None)
        if cls is None:
            return None
        scope = cls.body
    return next((s for s in scope if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _parser_settings(tree: ast.Module) -> tuple[str, bool]:
    """``prog`` and ``allow_abbrev`` of the parser ``prepare_server_args`` builds."""
    prog, allow_abbrev = "launch_server.py", True  # argparse's default prog under ``python -m``
    function = _find_function(tree, None, "prepare_server_args")
    for node in ast.walk(function) if function else ():
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ArgumentParser"):
            for kw in node.keywords:
                if kw.arg == "prog" and isinstance(kw.value, ast.Constant):
                    prog = kw.value.value
                if kw.arg == "allow_abbrev" and isinstance(kw.value, ast.Constant):
                    allow_abbrev = bool(kw.value.value)
    return prog, allow_abbrev


# -- 0.5.23: annotated namespace fields ---------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    name: str
    annotation: ast.expr
    has_default: bool
    module: str


def _namespace_fields(modules: _Modules, server_args: ast.Module) -> list[_Field]:
    """Fields of the namespace Structs ``_INPUT_NAMESPACES`` lists, in ``collect_input_fields`` order."""
    listing = next(
        (s.value for s in server_args.body if isinstance(s, ast.Assign)
         and any(isinstance(t, ast.Name) and t.id == "_INPUT_NAMESPACES" for t in s.targets)),
        None,
    )
    if not isinstance(listing, ast.List):
        raise InputError(f"{SERVER_ARGS} has no _INPUT_NAMESPACES list; this SGLang layout is not supported")
    fields: dict[str, _Field] = {}
    for elt in listing.elts:
        ref = modules.lookup(SERVER_ARGS, ast.unparse(elt)) if isinstance(elt, ast.Name) else None
        if not isinstance(ref, _ClassRef):
            raise InputError(f"cannot find namespace class {ast.unparse(elt)} of {SERVER_ARGS}")
        for stmt in ref.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id.startswith("_"):
                    continue
                fields.setdefault(stmt.target.id, _Field(stmt.target.id, stmt.annotation, stmt.value is not None, ref.module))
    try:
        order = list(modules.lookup("sglang.srt.arg_groups.field_order", "POSITIONAL_FIELD_ORDER"))
    except _Unresolved:
        order = []
    known = [n for n in order if n in fields]
    rest = [n for n in fields if n not in set(order)]
    return [fields[n] for n in known + rest]


def _arg_meta(field: _Field) -> dict[str, ast.expr] | None:
    """``Arg(...)`` keywords of ``A[T, ...]`` (a bare string is ``Arg(help=...)``); None: not a CLI field."""
    ann = field.annotation
    if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated", "typing.Annotated")):
        return None
    parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    for meta in parts[1:]:
        if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
            return {"help": meta}
        if isinstance(meta, ast.Call) and ast.unparse(meta.func).split(".")[-1] == "Arg":
            return {k.arg: k.value for k in meta.keywords if k.arg}
    return None


def _unwrap_optional(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Optional":
        return node.slice
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Union":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rest = [e for e in elts if ast.unparse(e) != "None"]
        return rest[0] if len(rest) == 1 else node
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if ast.unparse(s) != "None"]
        return sides[0] if len(sides) == 1 else node
    return node


def _literal_values(modules: _Modules, node: ast.expr, module: str) -> list[Any] | None:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [modules.value(e, module) for e in elts]
    return None


def _spec_from_field(modules: _Modules, field: _Field) -> FlagSpec | None:
    meta = _arg_meta(field)
    if meta is None:
        return None
    module = field.module

    def get(key: str) -> Any:
        try:
            return modules.value(meta[key], module) if key in meta else None
        except _Unresolved:
            return None

    if get("no_cli"):
        return None
    cli_name = get("cli_name") or "--" + field.name.replace("_", "-")
    names = [cli_name] + list(get("aliases") or [])
    help_text = get("help")
    choices, dynamic = _choices(modules, meta.get("choices"), module, {})
    type_parser = _type_name(meta["type_parser"]) if "type_parser" in meta else None
    if "action" in meta:
        action = _action_name(meta["action"])
        extra = get("action_kwargs") or {}
        nargs = extra.get("nargs", _default_nargs(modules, action, module)) if isinstance(extra, dict) else None
        return FlagSpec(_option_strings(names, action), field.name, action, nargs, "str", choices, dynamic,
                        deprecated=_deprecation(action, None, help_text))
    inner = _unwrap_optional(field.annotation.slice.elts[0])  # type: ignore[attr-defined]
    literal = _literal_values(modules, inner, module)
    deprecated = _deprecation("store", None, help_text)
    if literal is not None:
        first = literal[0] if literal else ""
        value_type = type_parser or (type(first).__name__ if isinstance(first, (int, float)) else "str")
        return FlagSpec(tuple(names), field.name, "store", None, value_type,
                        choices if choices is not None else tuple(literal), dynamic, deprecated=deprecated)
    inner_text = ast.unparse(inner)
    is_list = isinstance(inner, ast.Subscript) and ast.unparse(inner.value).split(".")[-1] in ("List", "list")
    if (is_list or inner_text in ("List", "list")) and type_parser is None:
        elem = _type_name(inner.slice) if isinstance(inner, ast.Subscript) else "str"
        return FlagSpec(tuple(names), field.name, "store", get("nargs") or "+",
                        elem if elem in ("int", "float") else "str", choices, dynamic, deprecated=deprecated)
    if inner_text == "bool":
        return FlagSpec(tuple(names), field.name, "store_true", 0, deprecated=deprecated)
    value_type = type_parser or (inner_text if inner_text in ("int", "float") else "str")
    required = get("required") is True or (get("required") is None and not field.has_default)
    return FlagSpec(tuple(names), field.name, "store", get("nargs"), value_type, choices, dynamic,
                    required=required, deprecated=deprecated)


# -- entry point -----------------------------------------------------------------------------


def extract_flag_table(tree: SourceTree, version: str | None = None) -> FlagTable:
    """The flags ``python -m sglang.launch_server`` accepts, read from the SGLang source in ``tree``.

    Raises :class:`InputError` when the tree holds no ``sglang/srt/server_args.py``.
    """
    modules = _Modules(tree)
    server_args = modules.require(SERVER_ARGS)
    function = _find_function(server_args, "ServerArgs", "add_cli_args")
    if function is None:
        raise InputError(f"ServerArgs.add_cli_args not found in {tree.describe()}; this SGLang layout is not supported")
    annotated = tree.is_dir(FIELDS_PACKAGE)

    def expand() -> list[FlagSpec]:
        specs = (_spec_from_field(modules, f) for f in _namespace_fields(modules, server_args))
        return [s for s in specs if s is not None]

    specs = _add_argument_specs(modules, function, SERVER_ARGS, expand)
    prog, allow_abbrev = _parser_settings(server_args)
    help_flag = FlagSpec(("-h", "--help"), "help", "help", 0)
    method = ("annotated msgspec fields (arg_groups/fields) + add_cli_args" if annotated
              else "argparse add_argument calls in ServerArgs.add_cli_args")
    return FlagTable(version, prog, f"AST of {method}", (help_flag, *specs), allow_abbrev, _environment(modules))


def _environment(modules: _Modules) -> tuple[str, ...]:
    """Names of the ``Envs`` descriptors in ``sglang/srt/environ.py`` (0.5.x), sorted; () if absent."""
    tree = modules.module("sglang.srt.environ")
    envs = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Envs"), None) if tree else None
    if envs is None:
        return ()
    return tuple(sorted(
        target.id for stmt in envs.body if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
        for target in stmt.targets if isinstance(target, ast.Name)
    ))

