"""The runner's action → handler table is complete: every action the machine can ask for has a handler, and
the table names no action the machine does not have (a handler found by a name built at run time could not
be checked like this)."""

from __future__ import annotations

import inspect
import typing

from deployctl.decisions import machine as m
from deployctl.live.runner import HANDLERS, Runner


def test_every_action_of_the_machine_has_a_handler() -> None:
    actions = set(typing.get_args(m.Action))
    assert actions, "m.Action lists the machine's actions"
    assert set(HANDLERS) == actions


def test_every_handler_is_a_coroutine_method_of_the_runner() -> None:
    for action, handler in HANDLERS.items():
        assert inspect.iscoroutinefunction(handler), action
        assert getattr(Runner, handler.__name__) is handler, action
