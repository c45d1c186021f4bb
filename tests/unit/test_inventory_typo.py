"""A misspelt required key is one problem with a did-you-mean, not "missing" plus "unknown"."""

from __future__ import annotations

import pytest
from testpaths import REPO

from deployctl.inventory.model import parse_inventory
from deployctl.inventory.problems import InventoryInvalid

EXAMPLE = (REPO / "inventory" / "example.yaml").read_text()


def test_a_misspelt_required_key_is_one_problem_with_a_did_you_mean() -> None:
    text = EXAMPLE.replace("    unit: sglang-glm5.service", "    unti: sglang-glm5.service")
    with pytest.raises(InventoryInvalid) as err:
        parse_inventory(text, "inv.yaml")
    (problem,) = err.value.problems
    assert problem.key == "deployments.glm5.unti"
    assert problem.message.startswith("unknown key; did you mean 'unit'?")


def test_a_key_missing_without_a_lookalike_is_still_missing() -> None:
    text = EXAMPLE.replace("    unit: sglang-glm5.service\n", "    colour: blue\n")
    with pytest.raises(InventoryInvalid) as err:
        parse_inventory(text, "inv.yaml")
    messages = {p.key: p.message for p in err.value.problems}
    assert messages["deployments.glm5.unit"] == "required key is missing"
    assert messages["deployments.glm5.colour"].startswith("unknown key")
