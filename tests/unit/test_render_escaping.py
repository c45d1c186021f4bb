"""Rendering is a security boundary: hostile values are quoted so they reach the process verbatim,
or refused with the inventory key named — never turned into another directive.

``decode_*`` below is an independent reading of systemd's rules (systemd.syntax(7), systemd.service(5)):
lines ending in a backslash continue, ``%%`` is a literal ``%``, words split on whitespace outside
double quotes, C escapes are undone, and in command lines ``$$`` is a literal ``$``.
"""

from __future__ import annotations

import random
import re

import pytest
from support.hostile import HOSTILE, inventory_with

from deployctl.errors import InputError
from deployctl.inventory.model import InventoryInvalid
from deployctl.unit_escape import (
    environment_assignment,
    exec_arg,
    forbidden_character,
    plain_value,
)
from deployctl.units.render import render_unit

_C_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b", "f": "\f",
              "r": "\r", "v": "\v", "s": " "}


def _words(value: str) -> list[str]:
    words, i = [], 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        word, quoted = "", False
        while i < len(value) and (quoted or not value[i].isspace()):
            char = value[i]
            if char == '"':
                quoted = not quoted
            elif char == "\\":
                i += 1
                word += _C_ESCAPES[value[i]]
            else:
                word += char
            i += 1
        assert not quoted, f"unterminated quote in {value!r}"
        words.append(word)
    return words


def directives(text: str) -> list[tuple[str, str]]:
    """(key, raw value) of every directive, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    return [tuple(line.split("=", 1)) for line in joined.splitlines()
            if line and not line.startswith(("#", ";", "["))]


def decode_exec(value: str) -> list[str]:
    words = _words(value.replace("%%", "\0"))
    assert all("$" not in w.replace("$$", "") for w in words), f"unescaped $ (variable expansion) in {value!r}"
    return [w.replace("\0", "%").replace("$$", "$") for w in words]


def decode_environment(value: str) -> dict[str, str]:
    return dict(w.replace("\0", "%").split("=", 1) for w in _words(value.replace("%%", "\0")))


@pytest.mark.parametrize("value", HOSTILE)
def test_exec_start_arguments_survive_verbatim(value: str) -> None:
    unit = render_unit(inventory_with(flags={"chat-template": value, "lora-paths": [value, "b"]}, served_name=value),
                       "d", "baseline")
    [exec_start] = [v for k, v in directives(unit.text) if k == "ExecStart"]
    argv = decode_exec(exec_start)
    assert argv[argv.index("--served-model-name") + 1] == value
    assert argv[argv.index("--chat-template") + 1] == value
    assert argv[argv.index("--lora-paths") + 1: argv.index("--lora-paths") + 3] == [value, "b"]


@pytest.mark.parametrize("value", HOSTILE)
def test_environment_values_survive_verbatim(value: str) -> None:
    unit = render_unit(inventory_with(env={"HOSTILE": value, "AFTER": "1"}), "d", "baseline")
    envs = [v for k, v in directives(unit.text) if k == "Environment"]
    assert len(envs) == 3  # PYTHONUNBUFFERED, HOSTILE, AFTER and nothing else
    decoded = {}
    for raw in envs:
        decoded.update(decode_environment(raw))
    assert decoded == {"PYTHONUNBUFFERED": "1", "HOSTILE": value, "AFTER": "1"}


def test_random_hostile_values_round_trip_and_add_no_directive() -> None:
    rng = random.Random(20260129)
    alphabet = list('ab "\\$%;\'={}`#&|<>*?~é🙂') + ["$$", "%%", "\\\\", "--", "ExecStartPre=/bin/sh"]
    for _ in range(200):
        values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3)]
        if ";" in values:
            continue
        unit = render_unit(inventory_with(flags={"x-a": values[0], "x-b": [values[1], values[2]]},
                                          env={"V0": values[0], "V1": values[1]}), "d", "baseline")
        found = directives(unit.text)
        keys = [k for k, _ in found]
        assert keys.count("ExecStart") == 1 and keys.count("Environment") == 3
        assert not any(k.startswith("ExecStartPre") for k in keys)
        argv = decode_exec(dict(found)["ExecStart"])
        assert argv[argv.index("--x-a") + 1] == values[0]
        assert argv[argv.index("--x-b") + 1: argv.index("--x-b") + 3] == values[1:]
        env = {}
        for key, raw in found:
            if key == "Environment":
                env.update(decode_environment(raw))
        assert (env["V0"], env["V1"]) == (values[0], values[1])


def test_the_newline_injection_of_the_issue_is_refused_at_load() -> None:
    with pytest.raises(InventoryInvalid) as info:
        inventory_with(env={"EVIL": "x\nExecStartPre=/bin/rm -rf /"})
    [problem] = info.value.problems
    assert problem.key == "deployments.d.profiles.baseline.env.EVIL"
    assert "newline" in problem.message


def test_values_that_bypass_the_loader_are_still_refused_with_the_key() -> None:
    # A caller building models in code skips load-time checks; rendering refuses on its own.
    inv = inventory_with()
    dep = inv.deployment("d")
    profile = dep.profiles["baseline"]
    for field, bad, key in (
        ("env", {"EVIL": "x\nExecStartPre=/bin/rm -rf /"}, "deployments.d.profiles.baseline.env.EVIL"),
        ("flags", {"chat-template": "a\0b"}, "deployments.d.profiles.baseline.flags.chat-template"),
        ("flags", {"chat-template": ";"}, "deployments.d.profiles.baseline.flags.chat-template"),
        ("env", {"BAD NAME": "x"}, "deployments.d.profiles.baseline.env.BAD NAME"),
    ):
        hostile = dep.model_copy(update={"profiles": {"baseline": profile.model_copy(update={field: bad})}})
        hostile._name = "d"
        with pytest.raises(InputError) as info:
            render_unit(inv, hostile, "baseline")
        assert info.value.message.startswith(key + ":")


@pytest.mark.parametrize("value,expected", [
    ("plain-value_1.0", "plain-value_1.0"),
    ("org/model:v2,x=y+z@1", "org/model:v2,x=y+z@1"),
    ("a b", '"a b"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("$HOME", '"$$HOME"'),
    ("50%", '"50%%"'),
    ("", '""'),
])
def test_exec_arg_quoting(value: str, expected: str) -> None:
    assert exec_arg(value) == expected


def test_environment_assignment_quoting() -> None:
    assert environment_assignment("K", 'a "b" \\ $X 5%') == '"K=a \\"b\\" \\\\ $X 5%%"'
    with pytest.raises(ValueError):
        environment_assignment("1K", "v")


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\0b", "\x1b[31m", "a\x7fb", "a\x85b", "a\u2028b", "tab\there"])
def test_control_characters_are_refused_everywhere(value: str) -> None:
    assert forbidden_character(value)
    for quote in (exec_arg, plain_value, lambda v: environment_assignment("K", v)):
        with pytest.raises(ValueError):
            quote(value)


def test_printable_unicode_is_allowed() -> None:
    assert forbidden_character("ü ∑ 🙂 — “quotes”") is None
