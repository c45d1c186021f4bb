"""Shared test configuration.

System tests (marker ``system``) need root to boot systemd in a private namespace. Outside CI they
skip with a reason when not root; under ``CI=true`` a missing precondition is a failure, never a skip.

scripts/test runs the suite on two pytest-xdist workers (``--dist loadfile``): every system test on one
of them, one after the other on one sandboxed systemd as before, and the unit, adapter and CLI tests on the
other meanwhile. The system tests run one at a time on purpose: two at once (``--dist loadfile``) measured
faster, but the judge's tests of neutral candidates then came out inconclusive on two loaded cores.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile`` (scripts/test): each module goes to one worker, and all the system tests
    together count as one module, so they run one after the other on one worker and its sandboxed systemd."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SystemTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "tests/system" if module.startswith("tests/system/") else module

    return SystemTestsTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The system tests first: their worker starts on them at once, the rest of the suite runs beside them.
    items.sort(key=lambda item: "system" not in item.keywords)  # stable: the order within each part stays
    if os.geteuid() == 0:
        return
    system = [item for item in items if "system" in item.keywords]
    if system and os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError("CI=true: the system tests must run, and they need root")
    for item in system:
        item.add_marker(pytest.mark.skip(reason="system tests need root (they boot systemd in a namespace)"))
