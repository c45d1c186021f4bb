"""What is wrong with an inventory, located: ``FILE:LINE: key.path: message``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from deployctl.errors import InputError
from deployctl.unit_escape import forbidden_character


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}: {self.message}"


class InventoryInvalid(InputError):
    """Every problem found in one inventory, reported together (exit 2)."""

    def __init__(self, file: str, problems: Sequence[Problem]) -> None:
        self.problems = sorted(problems)
        count = len(self.problems)
        heading = f"{file}: {count} problem{'s' if count != 1 else ''}"
        super().__init__(
            "\n".join([heading, *map(str, self.problems)]),
            hint=f"fix the lines above, then check again with `deployctl validate -i {file}`",
        )


def dotted(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else f".{printable(str(part))}"
    return text.lstrip(".") or "(file)"


def printable(text: str) -> str:
    """A key as it can be shown on one line of a terminal or mail (control characters escaped)."""
    return "".join(c.encode("unicode_escape").decode("ascii") if forbidden_character(c) else c for c in text)
