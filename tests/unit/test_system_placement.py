"""Every tests/system module says where scripts/test runs it (``serial`` or ``parallel``); one that says neither
stops the run with what to choose, instead of joining a queue silently."""

from __future__ import annotations

import pytest
from support.placement import Unplaced, place_of
from testpaths import REPO


def test_every_system_module_has_a_place() -> None:
    modules = sorted((REPO / "tests" / "system").glob("test_*.py"))
    assert modules
    places = {path.name: place_of(path.read_text(), path.name) for path in modules}
    assert set(places.values()) == {"serial", "parallel"}, places


@pytest.mark.parametrize("source, expected", [
    ("pytestmark = [pytest.mark.system, pytest.mark.serial, pytest.mark.timeout(300)]\n", "serial"),
    ("pytestmark = [pytest.mark.system, pytest.mark.parallel]\n", "parallel"),
])
def test_the_place_is_read_from_pytestmark(source: str, expected: str) -> None:
    assert place_of("import pytest\n" + source, "tests/system/test_x.py") == expected


@pytest.mark.parametrize("source, found", [
    ("pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]\n", "found neither"),
    ("pytestmark = [pytest.mark.serial, pytest.mark.parallel]\n", "found parallel and serial"),
    ("@pytest.mark.serial\ndef test_one():\n    pass\n", "found neither"),  # per test: xdist schedules modules
])
def test_a_module_without_one_place_is_refused_with_what_to_choose(source: str, found: str) -> None:
    with pytest.raises(Unplaced, match="tests/system/test_x.py: its module-level pytestmark needs exactly one of"
                                       " pytest.mark.serial") as refused:
        place_of("import pytest\n" + source, "tests/system/test_x.py")
    assert found in str(refused.value) and "the safe choice when unsure" in str(refused.value)
