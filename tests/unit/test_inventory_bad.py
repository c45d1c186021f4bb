"""Every bad inventory under tests/data/inventories/bad/ lists exactly the problems its comments expect.

A line ending in ``# expect: KEY.PATH: MESSAGE PART`` says: a problem is reported on this line, for
this key path, and its message contains MESSAGE PART. Every reported problem must be expected, and
every expectation met, so a file tests both the exact FILE:LINE and key path and the absence of noise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from testpaths import DATA

from deployctl.cli import main
from deployctl.inventory.model import InventoryInvalid, load_inventory

BAD = sorted((DATA / "inventories" / "bad").glob("*.yaml"))
_EXPECT = re.compile(r"#\s*expect:\s*(?P<key>.+?): (?P<message>.+)$")


def _expectations(path: Path) -> list[tuple[int, str, str]]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if match := _EXPECT.search(line):
            found.append((number, match["key"], match["message"].strip()))
    return found


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_inventory_reports_exact_locations(path: Path) -> None:
    expected = _expectations(path)
    assert expected, f"{path.name} declares no expectations"
    with pytest.raises(InventoryInvalid) as info:
        load_inventory(path)
    problems = info.value.problems
    located = [(p.line, p.key) for p in problems]
    for line, key, message in expected:
        matching = [p for p in problems if (p.line, p.key) == (line, key)]
        assert matching, f"expected {path.name}:{line}: {key}; got {located}"
        assert any(message in p.message for p in matching), f"{line}: {key}: {[p.message for p in matching]}"
    unexpected = [str(p) for p in problems if (p.line, p.key) not in {(line, key) for line, key, _ in expected}]
    assert not unexpected, "problems nobody expected:\n" + "\n".join(unexpected)
    repeated = [spot for spot in set(located) if located.count(spot) > [(l, k) for l, k, _ in expected].count(spot)]
    assert not repeated, f"one mistake reported more than once: {repeated}"
    assert all(p.file == str(path) for p in problems)


def test_problems_print_as_file_line_key_message(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "inventories" / "bad" / "01-tp-not-an-integer.yaml"
    assert main(["validate", "-i", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:21: deployments.glm5.profiles.candidate.flags.tp: expected an integer, got 'eight'" in err.splitlines()


def test_all_problems_of_a_file_are_reported_together(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "inventories" / "bad" / "08-flag-values.yaml"
    assert main(["validate", "-i", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith(str(path) + ":")]
    assert len(lines) == len(_expectations(path))


def test_a_hostile_key_is_shown_escaped_on_one_line() -> None:
    with pytest.raises(InventoryInvalid) as info:
        load_inventory(DATA / "inventories" / "bad" / "06-hostile-values.yaml")
    assert all("\n" not in str(p) and "\r" not in str(p) for p in info.value.problems)
