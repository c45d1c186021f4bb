"""The fleet rollout's shape (ansible/.../plugins/filter/fleet.py): batch sizes as Ansible's ``serial``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("ansible", reason="ansible-core is not installed (the test extra needs Python >= 3.11)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ansible"))

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.deployctl.sglang.plugins.filter.fleet import fleet_batches  # noqa: E402


@pytest.mark.parametrize(("steps", "fleet", "cap", "expected"), [
    ([1, "25%"], 8, "25%", [1, 2]),          # a canary host, then a quarter at a time
    ([1, "50%"], 8, "25%", [1, 2]),          # half the fleet at once is capped at max_unavailable
    ([1, 2, "100%"], 5, "40%", [1, 2, 2]),   # 40 % of 5 hosts: 2
    ([1, "10%"], 3, "100%", [1, 1]),         # a share rounds up, never below one host
    ([3], 10, 2, [2]),                       # max_unavailable as a count
])
def test_batch_sizes_are_capped_by_max_unavailable(steps, fleet, cap, expected):
    assert fleet_batches(steps, fleet, cap) == expected


@pytest.mark.parametrize(("steps", "cap"), [([], "25%"), ([0], "25%"), (["150%"], "25%"), ([1], "0%"), (["x"], 1)])
def test_a_shape_that_is_no_count_is_refused_with_its_value(steps, cap):
    with pytest.raises(AnsibleFilterError, match="fleet_batches|max_unavailable"):
        fleet_batches(steps, 4, cap)
