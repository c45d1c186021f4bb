"""``{env: NAME}``: the one deliberate ``${NAME}`` in ExecStart (a secret from the EnvironmentFile), checked;
and a literal secret flag value refused, with the way to do it instead."""

from __future__ import annotations

import pytest
import yaml
from support.hostile import BASE

from deployctl.adapters.envfile import parse_environment_file
from deployctl.inventory.model import InventoryInvalid, parse_inventory
from deployctl.units.render import render_unit


def _inventory(flags: dict, *, env_file: str | None = "/etc/sglang/d.env"):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["deployments"]["d"]["profiles"]["baseline"]["flags"].update(flags)
    if env_file:
        data["deployments"]["d"]["environment_file"] = env_file
    return parse_inventory(yaml.safe_dump(data))


def _exec_lines(inv) -> list[str]:
    text = render_unit(inv, "d", "baseline", default_python="/usr/bin/python3").text
    return [line.strip() for line in text.splitlines() if "--api-key" in line or "--chat-template" in line]


def test_an_env_reference_renders_as_systemds_own_expansion_and_nothing_else_does() -> None:
    inv = _inventory({"api-key": {"env": "SGLANG_API_KEY"}, "chat-template": "${SGLANG_API_KEY}"})
    lines = _exec_lines(inv)
    assert "--api-key ${SGLANG_API_KEY} \\" in lines
    # The same text written as a plain value is still escaped: only {env: NAME} expands.
    assert any("$${SGLANG_API_KEY}" in line for line in lines if "--chat-template" in line)


@pytest.mark.parametrize("value,problem", [
    ("sk-literal-123", "holds a secret, and the inventory is not a secret store"),
    ({"env": "1BAD"}, "not an environment variable name"),
    ({"env": "X; rm -rf /"}, "not an environment variable name"),
    ({"env": "A", "default": "b"}, "or {env: NAME}; got a mapping"),
])
def test_bad_api_key_values_are_refused_with_the_key(value, problem) -> None:
    with pytest.raises(InventoryInvalid) as caught:
        _inventory({"api-key": value})
    text = str(caught.value.problems)
    assert problem in text and "flags.api-key" in text


def test_the_literal_secret_hint_names_the_environment_file_form() -> None:
    with pytest.raises(InventoryInvalid) as caught:
        _inventory({"api-key": "sk-literal-123"})
    assert "api-key: {env: SGLANG_API_KEY}" in str(caught.value.problems)
    assert "sk-literal-123" not in str(caught.value.problems)


def test_an_env_reference_needs_an_environment_file() -> None:
    with pytest.raises(InventoryInvalid) as caught:
        _inventory({"api-key": {"env": "SGLANG_API_KEY"}}, env_file=None)
    assert "environment_file" in str(caught.value.problems)


def test_the_environment_file_is_read_as_systemd_reads_it() -> None:
    text = "# comment\n; also\nA=1\nB = 'two words'\nC=\"q\\\"x\"\n\nbroken line\nKEY=sk-x=y\n"
    assert parse_environment_file(text) == {"A": "1", "B": "two words", "C": 'q"x', "KEY": "sk-x=y"}
