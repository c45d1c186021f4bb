"""Shared test configuration.

System tests (marker ``system``) need root to boot systemd in a private namespace. Outside CI they
skip with a reason when not root; under ``CI=true`` a missing precondition is a failure, never a skip.

scripts/test runs the suite on two pytest-xdist workers, a module to a worker (``--dist loadfile``: a module's
fixtures and its sandboxed world stay on one worker, each worker boots its own sandboxed systemd). The system
modules go first, the longest first, so that the two workers' shares even out and the unit tests fill the end.
"""

from __future__ import annotations

import os

import pytest


# The system modules, longest first (seconds of --durations on two loaded cores, December 2026): the order
# in which the workers take them. A module not listed comes after these, before the rest of the suite.
LONGEST_FIRST = (
    "test_remote_ops.py", "test_fleet_ansible.py", "test_faults_e2e.py", "test_bisect_e2e.py",
    "test_canary_e2e.py", "test_promote_e2e.py", "test_output_gate_e2e.py", "test_install.py",
    "test_canary_rollback_e2e.py", "test_report_e2e.py", "test_reuse_e2e.py", "test_canary_passive_e2e.py",
    "test_secrets_e2e.py", "test_systemd_verbs.py",
)


def _cost_rank(item: pytest.Item) -> int:
    name = item.path.name
    if name in LONGEST_FIRST:
        return LONGEST_FIRST.index(name)
    return len(LONGEST_FIRST) if "system" in item.keywords else len(LONGEST_FIRST) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_cost_rank)  # stable: a module's tests keep their order
    if os.geteuid() == 0:
        return
    system = [item for item in items if "system" in item.keywords]
    if system and os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError("CI=true: the system tests must run, and they need root")
    for item in system:
        item.add_marker(pytest.mark.skip(reason="system tests need root (they boot systemd in a namespace)"))
