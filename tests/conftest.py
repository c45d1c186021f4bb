"""Shared test configuration.

System tests (marker ``system``) need root to boot systemd in a private namespace. Outside CI they
skip with a reason when not root; under ``CI=true`` a missing precondition is a failure, never a skip.

scripts/test runs the suite on two pytest-xdist workers (``--dist loadfile``). Each module of tests/system says
in its ``pytestmark`` where it runs; there is no default, so a new module cannot join either queue silently
(collection stops and says what to choose):

- ``serial``: its verdicts are close (a neutral candidate, a few per cent of slowdown: the judge's, the canary's,
  the output gate's). These modules run one after the other on one worker and its sandboxed systemd. The safe
  choice when unsure.
- ``parallel``: its outcomes are clear by construction (regressions of half the speed, startup-gate failures, any
  verdict accepted; or no benchmark at all). The other worker, with a sandbox of its own, takes these, then the
  unit, adapter and CLI tests.

Not every system module on either worker (plain ``--dist loadfile``): measured faster, but two close verdicts then
came out inconclusive on two loaded cores.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest
from support.placement import PLACES, Unplaced, place_of
from testpaths import REPO


@functools.cache
def place(module: str) -> str:
    """``serial`` or ``parallel``: the place of a tests/system module (a path from the repository's root)."""
    try:
        return place_of((REPO / module).read_text(), module)
    except Unplaced as unplaced:
        raise pytest.UsageError(str(unplaced)) from None


def _serial(module: str) -> bool:
    """A system module of the close verdicts: these run one after the other, on one worker."""
    return module.startswith("tests/system/test_") and place(module) == "serial"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadfile`` (scripts/test): each module goes to one worker, and the system modules of the
    close verdicts together count as one module."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CloseVerdictsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "tests/system (close verdicts)" if _serial(module) else module

    return CloseVerdictsTogether(config, log)


def _check_place(item: pytest.Item) -> None:
    """The markers pytest applies agree with what ``place`` read from the source (a ``serial`` put on one test,
    or through a name, would be missed by the scheduler)."""
    module = item.nodeid.split("::", 1)[0]
    applied = {name for name in PLACES if item.get_closest_marker(name)}
    if applied != {place(module)}:
        raise pytest.UsageError(f"{item.nodeid}: marked {sorted(applied)}; put serial or parallel in the module's"
                                " pytestmark list, written out as pytest.mark.serial / pytest.mark.parallel")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("tests/system/test_"):
            _check_place(item)

    # The close verdicts first (one worker starts on them at once), then the other system modules (the other
    # worker), then the rest. Stable: the order within each part stays.
    def part(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return 0 if _serial(module) else 1 if "system" in item.keywords else 2

    items.sort(key=part)
    if os.geteuid() == 0:
        return
    system = [item for item in items if "system" in item.keywords]
    if system and os.environ.get("CI", "").lower() == "true":
        raise pytest.UsageError("CI=true: the system tests must run, and they need root")
    for item in system:
        item.add_marker(pytest.mark.skip(reason="system tests need root (they boot systemd in a namespace)"))
