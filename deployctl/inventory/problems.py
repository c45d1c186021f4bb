"""What is wrong with an inventory, located: ``FILE:LINE: key.path: message``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from deployctl.errors import InputError


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
