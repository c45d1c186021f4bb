"""FlagSpecs from ``parser.add_argument(...)`` calls (SGLang up to 0.5.11, and the hand-added flags of later
versions), plus the pieces every spec is made of (action, nargs, type, choices, deprecation)."""

from __future__ import annotations

import ast
import re
from typing import Any, Callable

from deployctl.preflight.astnames import ClassRef, EnumMember, Lazy, Modules, Unresolved
from deployctl.preflight.flagtable import FlagSpec, Nargs

SERVER_ARGS = "sglang.srt.server_args"

_SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
_TYPE_NAMES = {"str": "str", "int": "int", "float": "float", "json.loads": "json", "loads": "json"}
_DEPRECATION_HINT = re.compile(r"[Uu]se (--[\w-]+(?:[ =][\w{},<>-]+)?)")


def action_name(node: ast.expr | None) -> str:
    if node is None:
        return "store"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node).split(".")[-1]


def default_nargs(modules: Modules, action: str, module: str) -> Nargs:
    if action in _SWITCH_ACTIONS or action == "BooleanOptionalAction":
        return 0
    try:
        ref = modules.lookup(module, action)
    except Unresolved:
        return None
    if isinstance(ref, ClassRef):
        for stmt in ref.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                args = stmt.args
                positional = args.posonlyargs + args.args
                defaults = dict(zip([a.arg for a in positional][-len(args.defaults):], args.defaults)) if args.defaults else {}
                defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
                if "nargs" in defaults:
                    try:
                        return modules.value(defaults["nargs"], ref.module)
                    except Unresolved:
                        return None
    return None


def type_name(node: ast.expr | None) -> str:
    if node is None:
        return "str"
    text = ast.unparse(node)
    return _TYPE_NAMES.get(text, text.split(".")[-1])


def deprecation(action: str, new_flag: str | None, help_text: str | None) -> str | None:
    if action.startswith("Deprecated"):
        return new_flag or ""
    if help_text and re.match(r"\W*Deprecated", help_text):
        hint = _DEPRECATION_HINT.search(help_text)
        return hint.group(1) if hint else ""
    return None


def option_strings(names: list[str], action: str) -> tuple[str, ...]:
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


def choices_of(modules: Modules, node: ast.expr | None, module: str, env: dict[str, Any]) -> tuple[tuple | None, bool]:
    if node is None:
        return None, False
    try:
        value = modules.value(node, module, env)
        items = modules._iterate(value)
        return tuple(i.value if isinstance(i, EnumMember) else i for i in items), False
    except Unresolved:
        return None, True


def _spec_from_call(modules: Modules, call: ast.Call, module: str, env: dict[str, Any]) -> FlagSpec | None:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not names[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = action_name(kw.get("action"))
    nargs: Nargs
    if "nargs" in kw:
        try:
            nargs = modules.value(kw["nargs"], module, env)
        except Unresolved:
            nargs = "*"
    else:
        nargs = default_nargs(modules, action, module)
    choices, dynamic = choices_of(modules, kw.get("choices"), module, env)
    return FlagSpec(
        option_strings=option_strings(names, action),
        dest=_dest(names, _const_str(kw.get("dest"))),
        action=action,
        nargs=nargs,
        value_type=type_name(kw.get("type")) if nargs != 0 else "str",
        choices=choices,
        choices_dynamic=dynamic,
        required=_const_bool(kw.get("required")),
        deprecated=deprecation(action, _const_str(kw.get("new_flag")), _const_str(kw.get("help"))),
    )


def _const_str(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _const_bool(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def add_argument_specs(
    modules: Modules, function: ast.FunctionDef, module: str, expand: Callable[[], list[FlagSpec]]
) -> list[FlagSpec]:
    """Walk ``add_cli_args`` in order: local assignments bind names, ``add_argument`` calls add flags."""
    env: dict[str, Any] = {}
    specs: list[FlagSpec] = []
    for stmt in function.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = Lazy(lambda value=stmt.value: modules.value(value, module))
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


def find_function(tree: ast.Module, class_name: str | None, name: str) -> ast.FunctionDef | None:
    scope: list[ast.stmt] = tree.body
    if class_name is not None:
        cls = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == class_name), None)
        if cls is None:
            return None
        scope = cls.body
    return next((s for s in scope if isinstance(s, ast.FunctionDef) and s.name == name), None)


def parser_settings(tree: ast.Module) -> tuple[str, bool]:
    """``prog`` and ``allow_abbrev`` of the parser ``prepare_server_args`` builds."""
    prog, allow_abbrev = "launch_server.py", True  # argparse's default prog under ``python -m``
    function = find_function(tree, None, "prepare_server_args")
    for node in ast.walk(function) if function else ():
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("ArgumentParser"):
            for kw in node.keywords:
                if kw.arg == "prog" and isinstance(kw.value, ast.Constant):
                    prog = kw.value.value
                if kw.arg == "allow_abbrev" and isinstance(kw.value, ast.Constant):
                    allow_abbrev = bool(kw.value.value)
    return prog, allow_abbrev
