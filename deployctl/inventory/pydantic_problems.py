"""pydantic's validation errors as located problems: ``FILE:LINE: key.path: message`` in an operator's words."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Mapping, Union

from pydantic import BaseModel, ValidationError

from deployctl.inventory.marked_yaml import MarkedYaml
from deployctl.inventory.problems import Problem, dotted
from deployctl.unit_escape import forbidden_character

def pydantic_problems(
    exc: ValidationError, marked: MarkedYaml, file: str, root: type[BaseModel], prefix: tuple[Any, ...]
) -> list[Problem]:
    problems = []
    errors = exc.errors()
    # A misspelt required key is one mistake: say "did you mean" on the typo, not also "missing" on the key.
    misspelt = {tuple(e["loc"][:-1]) + (guess,) for e in errors if e["type"] == "extra_forbidden"
                for guess in difflib.get_close_matches(str(e["loc"][-1]), _fields_at(root, tuple(e["loc"][:-1])), n=1)}
    for err in errors:
        loc = prefix + tuple(err["loc"])
        value = err.get("input")
        if isinstance(value, str) and forbidden_character(value):
            continue  # reported once, as a control character, by the second pass
        if err["type"] == "missing" and tuple(err["loc"]) in misspelt:
            continue
        problems.append(
            Problem(file, marked.line_of(loc), dotted(loc), pydantic_message(err, root, tuple(err["loc"]))))
    return problems


def show_value(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


_TYPE_MESSAGES = {
    "int_type": "expected an integer", "int_parsing": "expected an integer", "int_from_float": "expected an integer",
    "float_type": "expected a number", "float_parsing": "expected a number",
    "bool_type": "expected true or false", "bool_parsing": "expected true or false",
    "string_type": "expected a string", "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping", "list_type": "expected a list",
}


def pydantic_message(err: Mapping[str, Any], root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        allowed = _fields_at(root, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key{guess} (allowed here: {', '.join(allowed)})"
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {show_value(err.get('input'))}"
    message = str(err["msg"])
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    if "input" in err and not isinstance(err["input"], (dict, list)):
        return f"{message[:1].lower()}{message[1:]}, got {show_value(err['input'])}"
    return message[:1].lower() + message[1:]


def _fields_at(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed in the mapping at ``loc`` (walks the model annotations)."""
    current: Any = root
    for part in loc:
        current = _unoptional(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return []
            current = field.annotation
        elif typing.get_origin(current) in (dict, list):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unoptional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unoptional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


