"""The polkit rule: exactly the inventory's units and deployctl's verbs; names that are not names refused."""

from __future__ import annotations

import pytest

from deployctl.inventory.model import load_inventory
from deployctl.units.polkit import VERBS, polkit_rule
from testpaths import REPO


def test_the_rule_lists_exactly_the_units_and_the_verbs() -> None:
    rule = polkit_rule(["sglang-b.service", "sglang-a.service", "sglang-a.service"], "ops")
    assert '"sglang-a.service",\n        "sglang-b.service"\n' in rule
    assert 'subject.isInGroup("ops")' in rule
    assert f"var verbs = [{', '.join(chr(34) + v + chr(34) for v in VERBS)}];" in rule
    assert "reload-daemon" not in rule.split("polkit.addRule", 1)[1]  # never granted: it also allows Reexecute
    assert "sglang-*" not in rule and "test(" not in rule  # no pattern matching other units


@pytest.mark.parametrize("units, group", [
    (['x.service"]; polkit.Result.YES; //'], "ops"),
    (["sglang.socket"], "ops"),
    ([], "ops"),
    (["sglang-a.service"], 'ops") || true || ("'),
])
def test_names_that_could_change_the_rule_are_refused(units: list[str], group: str) -> None:
    with pytest.raises(ValueError):
        polkit_rule(units, group)


def test_the_shipped_rule_is_the_example_inventorys() -> None:
    inv = load_inventory(REPO / "inventory" / "example.yaml")
    shipped = (REPO / "systemd" / "50-deployctl.rules").read_text()
    assert shipped == polkit_rule([d.unit for d in inv.deployments.values()])
