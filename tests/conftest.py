"""Shared test configuration.

System tests (marker ``system``) need root to boot systemd in a private namespace. Outside CI they
skip with a reason when not root; under ``CI=true`` a missing precondition is a failure, never a skip.
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    system = [item for item in items if "system" in item.keywords]
    if system and os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError("CI=true: the system tests must run, and they need root")
    for item in system:
        item.add_marker(pytest.mark.skip(reason="system tests need root (they boot systemd in a namespace)"))
