"""Where a tests/system module runs under scripts/test: ``serial`` or ``parallel`` (tests/conftest.py says what
each means), read from the ``pytestmark`` in its source, so that pytest-xdist's controller, which collects
nothing, knows it as well as the workers do."""

from __future__ import annotations

import ast

PLACES = ("serial", "parallel")


class Unplaced(ValueError):
    """A system module whose pytestmark names neither place, or both."""


def place_of(source: str, module: str) -> str:
    """The one of ``PLACES`` that the module-level ``pytestmark`` assignment of ``source`` marks."""
    tree = ast.parse(source, module)
    marks = {node.attr for statement in tree.body if isinstance(statement, ast.Assign)
             and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets)
             for node in ast.walk(statement.value) if isinstance(node, ast.Attribute) and node.attr in PLACES}
    if len(marks) != 1:
        raise Unplaced(
            f"{module}: its module-level pytestmark needs exactly one of pytest.mark.serial (close verdicts: run one"
            " after the other on one worker; the safe choice when unsure) and pytest.mark.parallel (outcomes clear"
            f" by construction: may run beside them); found {' and '.join(sorted(marks)) or 'neither'}")
    return marks.pop()
