"""systemd unit-file quoting: the one place that turns inventory values into unit-file syntax.

Rendering is a security boundary: an inventory value must never become a second directive or be
rewritten by systemd on the way to the process. Values with control characters are rejected before
they get here (``forbidden_character``); what remains is quoted per systemd.syntax(7) and
systemd.service(5):

- specifiers: ``%`` → ``%%`` in every value systemd expands specifiers in (all of those we write);
- ``ExecStart=``: each argument is left bare when it is plainly safe, else double-quoted with ``\\``
  and ``"`` backslash-escaped (systemd C-unescapes inside quotes); ``$`` → ``$$`` always, because
  systemd expands ``$VAR``/``${VAR}`` in command lines; a lone ``;`` is refused (it separates commands);
- ``${NAME}`` in ``ExecStart=`` only where the inventory asked for it, ``{env: NAME}`` (``EnvArg``):
  systemd fills it in from the EnvironmentFile, so a secret reaches the process without being in the unit;
- ``Environment=``: one ``"KEY=value"`` per variable, quoted and escaped the same way (no ``$``
  expansion happens there, so ``$`` stays as is).
"""

from __future__ import annotations

import re

# Characters that may stand unquoted in an ExecStart argument: nothing systemd treats specially.
_BARE_ARG = re.compile(r"[A-Za-z0-9_./:=+,@-]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_CHAR_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte"}


def forbidden_character(value: str) -> str | None:
    """Describe the first character that may not appear in a unit-file value, or None if all are fine.

    C0/C1 control characters (newline, NUL, tab, ESC, DEL …) and the Unicode line/paragraph separators
    are refused outright: quoting could carry some of them, but none belongs in a flag or environment
    value, and a newline is exactly how a value would smuggle in a second directive. A lone UTF-16
    surrogate (YAML's ``"\\ud800"``) is not a character at all: no file can hold it as UTF-8.
    """
    for char in value:
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F or char in "\u2028\u2029":
            return _CHAR_NAMES.get(char, f"the control character U+{code:04X}")
        if 0xD800 <= code <= 0xDFFF:
            return f"a lone surrogate U+{code:04X} (not a character; no UTF-8 file can hold it)"
    return None


def escape_specifiers(value: str) -> str:
    """Escape systemd specifiers (``%n``, ``%h`` …) so the value reaches the process verbatim."""
    return value.replace("%", "%%")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_arg(value: str) -> str:
    """One ``ExecStart=`` argument in systemd syntax (bare when safe, else double-quoted)."""
    if isinstance(value, EnvArg):
        return str(value)  # ${NAME}, unescaped: the one place systemd is meant to expand
    _require_clean(value)
    if value == ";":
        raise ValueError("a lone ';' would split the command line in ExecStart=")
    escaped = escape_specifiers(value).replace("$", "$$")
    return escaped if _BARE_ARG.fullmatch(value) else _quote(escaped)


class EnvArg(str):
    """A command-line argument that is systemd's ``${NAME}``: the value of ``NAME`` from the unit's
    environment (its EnvironmentFile), substituted by systemd as one argument."""

    name: str

    def __new__(cls, name: str) -> "EnvArg":
        if not ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")
        arg = super().__new__(cls, "${" + name + "}")
        arg.name = name
        return arg


def environment_assignment(name: str, value: str) -> str:
    """The value of one ``Environment=`` line: ``"NAME=value"`` quoted and escaped."""
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid environment variable name")
    _require_clean(value)
    return _quote(escape_specifiers(f"{name}={value}"))


def list_item(value: str) -> str:
    """One word of a whitespace-separated list directive (``ReadWritePaths=``): double-quoted and escaped,
    specifiers escaped, so a path with a space or a ``%`` stays one path and means itself."""
    _require_clean(value)
    return _quote(escape_specifiers(value))


def plain_value(value: str) -> str:
    """A single-word directive value (a path, a user name, a description) with specifiers escaped."""
    _require_clean(value)
    return escape_specifiers(value)


def _require_clean(value: str) -> None:
    bad = forbidden_character(value)
    if bad:
        raise ValueError(f"contains {bad}, which may not appear in a unit file")
