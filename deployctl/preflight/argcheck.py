"""An argparse-equivalent check of a launch command against one SGLang version's flag table.

SGLang parses its command line with a stock ``argparse.ArgumentParser`` (``allow_abbrev`` left on), so
the rules below are argparse's (CPython ``Lib/argparse.py``: ``_parse_optional``,
``_get_option_tuples``, ``_match_argument``, ``_get_values``/``_check_value``) and every message is the
one argparse would print after ``<prog>: error: ``. Unlike argparse, the check does not stop at the
first problem: an operator fixing a candidate wants all of them at once. :func:`first_error` says
which one SGLang itself would stop at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from deployctl.preflight.flagtable import FlagSpec, FlagTable

ProblemKind = Literal[
    "unknown", "ambiguous", "invalid_choice", "invalid_value", "missing_value", "explicit_value_ignored",
    "required", "deprecated", "abbreviation",
]
# Problems argparse raises on the spot, in command-line order; "unknown" and "required" come at the end.
_IMMEDIATE = ("ambiguous", "invalid_choice", "invalid_value", "missing_value", "explicit_value_ignored")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass(frozen=True)
class ArgProblem:
    kind: ProblemKind
    option: str  # as written on the command line
    message: str  # argparse's text after "error: " (for deprecated/abbreviation: deployctl's own)
    flag: FlagSpec | None = None
    matches: tuple[str, ...] = ()
    values: tuple[str, ...] = ()

    @property
    def fatal(self) -> bool:
        return self.kind not in ("deprecated", "abbreviation")


@dataclass(frozen=True)
class PythonStyle:
    """argparse's wording changed across CPython releases; the deployment's interpreter decides."""

    version: tuple[int, int, int] = (3, 11, 0)

    @property
    def choices_as_str(self) -> bool:
        # gh-117766: 3.12.8 and 3.13.1 print the choices with str() instead of repr().
        major_minor = self.version[:2]
        return (major_minor == (3, 12) and self.version >= (3, 12, 8)) or self.version >= (3, 13, 1)


def _is_option(token: str, table: FlagTable) -> bool:
    if not token or token[0] != "-" or token == "-" or token == "--":
        return False
    if token in table.option_strings:
        return True
    if _NEGATIVE_NUMBER.match(token):
        return False  # SGLang defines no negative-number-like options, so argparse reads it as a value
    return " " not in token


def _argument_name(flag: FlagSpec) -> str:
    return "/".join(flag.option_strings)


def _convert(flag: FlagSpec, raw: str) -> tuple[Any, str | None]:
    """The value after argparse's ``type=`` call, or the error it raises."""
    converters = {"int": int, "float": float}
    convert = converters.get(flag.value_type)
    if convert is None:
        return raw, None
    try:
        return convert(raw), None
    except ValueError:
        return raw, f"argument {_argument_name(flag)}: invalid {flag.value_type} value: {raw!r}"


def _choice_error(flag: FlagSpec, raw: str, value: Any, style: PythonStyle) -> str | None:
    if flag.choices is None:
        return None
    if flag.value_type not in ("str", "int", "float"):
        # A custom type function (e.g. parse_cuda_graph_backend_arg) normalises first; compare as text.
        if str(value) in {str(c) for c in flag.choices}:
            return None
    elif value in flag.choices:
        return None
    shown = ", ".join(str(c) for c in flag.choices) if style.choices_as_str else ", ".join(
        repr(c) for c in flag.choices)
    return f"argument {_argument_name(flag)}: invalid choice: {value!r} (choose from {shown})"


def _expected(flag: FlagSpec) -> str:
    if flag.nargs is None:
        return "expected one argument"
    if flag.nargs == "+":
        return "expected at least one argument"
    if isinstance(flag.nargs, int):
        return f"expected {flag.nargs} argument{'s' if flag.nargs != 1 else ''}"
    return "expected one argument"


def _takes(flag: FlagSpec, available: int) -> tuple[int, bool]:
    """How many following values argparse gives ``flag`` and whether that satisfies its nargs."""
    nargs = flag.nargs
    if nargs is None:
        return min(1, available), available >= 1
    if nargs == "?":
        return min(1, available), True
    if nargs == "*":
        return available, True
    if nargs == "+":
        return available, available >= 1
    if isinstance(nargs, int):
        return min(nargs, available), available >= nargs
    return available, True


def check_argv(table: FlagTable, argv: Sequence[str], style: PythonStyle = PythonStyle()) -> list[ArgProblem]:
    """Every problem argparse would find in ``argv`` (the arguments after ``-m sglang.launch_server``)."""
    problems: list[ArgProblem] = []
    unknown: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _is_option(token, table):
            unknown.append(token)  # SGLang has no positional arguments: a stray value is unrecognized
            continue
        option, explicit = (token.split("=", 1) + [None])[:2] if "=" in token else (token, None)
        flag = table.exact(option)
        if flag is None:
            matches = table.prefix_matches(option)
            if len(matches) > 1:
                problems.append(ArgProblem(
                    "ambiguous", option, f"ambiguous option: {token} could match {', '.join(matches)}",
                    matches=tuple(matches)))
                i = _skip_values(argv, i, table)
                continue
            if not matches:
                end = _skip_values(argv, i, table)
                problems.append(ArgProblem("unknown", option, "", values=tuple(argv[i:end])))
                unknown.extend([token, *argv[i:end]])
                i = end
                continue
            flag = table.exact(matches[0])
            assert flag is not None
            problems.append(ArgProblem(
                "abbreviation", option,
                f"{option} is accepted as an abbreviation of {matches[0]}; a future flag sharing the prefix "
                "would make it ambiguous", flag=flag, matches=(matches[0],)))
        seen.add(flag.dest)
        end = _skip_values(argv, i, table)
        values = [explicit] if explicit is not None else list(argv[i:end])
        if flag.nargs == 0:
            if explicit is not None:
                problems.append(ArgProblem("explicit_value_ignored", option,
                                           f"argument {_argument_name(flag)}: ignored explicit argument {explicit!r}",
                                           flag=flag))
        else:
            count, ok = _takes(flag, len(values))
            if not ok:
                problems.append(ArgProblem("missing_value", option, f"argument {_argument_name(flag)}: {_expected(flag)}",
                                           flag=flag))
            for raw in values[:count]:
                value, error = _convert(flag, raw)
                error = error or _choice_error(flag, raw, value, style)
                if error:
                    kind = "invalid_value" if "invalid choice" not in error else "invalid_choice"
                    problems.append(ArgProblem(kind, option, error, flag=flag, values=(raw,)))
                    break
            if explicit is None:
                i += count
        if flag.deprecated is not None:
            replacement = f" Use '{flag.deprecated}' instead." if flag.deprecated else ""
            problems.append(ArgProblem("deprecated", option,
                                       f"'{flag.name}' is deprecated and will be removed in a future release."
                                       f"{replacement}", flag=flag))
    for flag in table.flags:
        if flag.required and flag.dest not in seen:
            problems.append(ArgProblem("required", flag.name,
                                       f"the following arguments are required: {_argument_name(flag)}", flag=flag))
    if unknown:
        message = f"unrecognized arguments: {' '.join(unknown)}"
        problems = [p if p.kind != "unknown" else ArgProblem("unknown", p.option, message, values=p.values)
                    for p in problems]
        if not any(p.kind == "unknown" for p in problems):
            problems.append(ArgProblem("unknown", unknown[0], message, values=tuple(unknown[1:])))
    return problems


def _skip_values(argv: Sequence[str], i: int, table: FlagTable) -> int:
    while i < len(argv) and not _is_option(argv[i], table):
        i += 1
    return i


def first_error(problems: Sequence[ArgProblem]) -> ArgProblem | None:
    """The problem SGLang's own parse would stop at: the first on-the-spot error, else a missing required
    argument, else the unrecognized arguments."""
    for kinds in (_IMMEDIATE, ("required",), ("unknown",)):
        for problem in problems:
            if problem.kind in kinds:
                return problem
    return None


def render_error(table: FlagTable, problem: ArgProblem) -> str:
    """The last line argparse writes to stderr before exiting with status 2."""
    return f"{table.prog}: error: {problem.message}"


def parsed_values(table: FlagTable, argv: Sequence[str]) -> dict[str, Any]:
    """``dest → value`` as argparse would store it (switches True, ``--no-x`` False, lists for nargs
    ``+``/``*``), for the flags the table resolves; the catalogue matches rules against this."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _is_option(token, table):
            continue
        option, explicit = (token.split("=", 1) + [None])[:2] if "=" in token else (token, None)
        flag = table.resolve(option)
        if flag is None:
            continue
        end = _skip_values(argv, i, table)
        if flag.nargs == 0:
            values[flag.dest] = not option.startswith("--no-") if flag.action == "BooleanOptionalAction" else True
            continue
        given = [explicit] if explicit is not None else list(argv[i:end])
        count, _ = _takes(flag, len(given))
        taken = given[:count]
        if explicit is None:
            i += count
        values[flag.dest] = taken if flag.nargs in ("+", "*") or isinstance(flag.nargs, int) else (
            taken[0] if taken else None)
    return values
