"""FlagSpecs from SGLang 0.5.23's annotated msgspec fields (``arg_groups/fields/*.py``): ``A[T, "help"]`` or
``A[T, Arg(...)]``, turned into arguments the way ``arg_utils.add_cli_args_from_dataclass`` does
(Literal → choices, bool → ``store_true``, ``List`` → ``nargs="+"``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from deployctl.errors import InputError
from deployctl.preflight.argspecs import (
    SERVER_ARGS,
    action_name,
    choices_of,
    default_nargs,
    deprecation,
    option_strings,
    type_name,
)
from deployctl.preflight.astnames import ClassRef, Modules, Unresolved
from deployctl.preflight.flagtable import FlagSpec

@dataclass(frozen=True)
class _Field:
    name: str
    annotation: ast.expr
    has_default: bool
    module: str


def namespace_fields(modules: Modules, server_args: ast.Module) -> list[_Field]:
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
        if not isinstance(ref, ClassRef):
            raise InputError(f"cannot find namespace class {ast.unparse(elt)} of {SERVER_ARGS}")
        for stmt in ref.node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id.startswith("_"):
                    continue
                fields.setdefault(stmt.target.id, _Field(stmt.target.id, stmt.annotation, stmt.value is not None, ref.module))
    try:
        order = list(modules.lookup("sglang.srt.arg_groups.field_order", "POSITIONAL_FIELD_ORDER"))
    except Unresolved:
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


def _literal_values(modules: Modules, node: ast.expr, module: str) -> list[Any] | None:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).split(".")[-1] == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [modules.value(e, module) for e in elts]
    return None


def spec_from_field(modules: Modules, field: _Field) -> FlagSpec | None:
    meta = _arg_meta(field)
    if meta is None:
        return None
    module = field.module

    def get(key: str) -> Any:
        try:
            return modules.value(meta[key], module) if key in meta else None
        except Unresolved:
            return None

    if get("no_cli"):
        return None
    cli_name = get("cli_name") or "--" + field.name.replace("_", "-")
    names = [cli_name] + list(get("aliases") or [])
    help_text = get("help")
    choices, dynamic = choices_of(modules, meta.get("choices"), module, {})
    type_parser = type_name(meta["type_parser"]) if "type_parser" in meta else None
    if "action" in meta:
        action = action_name(meta["action"])
        extra = get("action_kwargs") or {}
        nargs = extra.get("nargs", default_nargs(modules, action, module)) if isinstance(extra, dict) else None
        return FlagSpec(option_strings(names, action), field.name, action, nargs, "str", choices, dynamic,
                        deprecated=deprecation(action, None, help_text))
    inner = _unwrap_optional(field.annotation.slice.elts[0])  # type: ignore[attr-defined]
    literal = _literal_values(modules, inner, module)
    deprecated = deprecation("store", None, help_text)
    if literal is not None:
        first = literal[0] if literal else ""
        value_type = type_parser or (type(first).__name__ if isinstance(first, (int, float)) else "str")
        return FlagSpec(tuple(names), field.name, "store", None, value_type,
                        choices if choices is not None else tuple(literal), dynamic, deprecated=deprecated)
    inner_text = ast.unparse(inner)
    is_list = isinstance(inner, ast.Subscript) and ast.unparse(inner.value).split(".")[-1] in ("List", "list")
    if (is_list or inner_text in ("List", "list")) and type_parser is None:
        elem = type_name(inner.slice) if isinstance(inner, ast.Subscript) else "str"
        return FlagSpec(tuple(names), field.name, "store", get("nargs") or "+",
                        elem if elem in ("int", "float") else "str", choices, dynamic, deprecated=deprecated)
    if inner_text == "bool":
        return FlagSpec(tuple(names), field.name, "store_true", 0, deprecated=deprecated)
    value_type = type_parser or (inner_text if inner_text in ("int", "float") else "str")
    required = get("required") is True or (get("required") is None and not field.has_default)
    return FlagSpec(tuple(names), field.name, "store", get("nargs"), value_type, choices, dynamic,
                    required=required, deprecated=deprecated)
