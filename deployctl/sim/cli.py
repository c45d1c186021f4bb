"""SGLang's argparse front end, rebuilt per version from data (cli.json).

cli.json was derived from 0.5.9's full argparse usage block (option order, choices, nargs) and the
ServerArgs field lists of each version (sglang-serverargs-fields.json); aliases such as --model and
--tp-size come from SGLang's add_argument calls.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

_DATA = Path(__file__).with_name("cli.json")


@lru_cache(maxsize=1)
def _specs() -> dict[str, Any]:
    return json.loads(_DATA.read_text())


def known_versions() -> list[str]:
    return list(_specs())


def canonical_version(version: str) -> str:
    """Map '0.4.10' to the stored '0.4.10.post2' and so on; unknown versions raise ValueError."""
    specs = _specs()
    if version in specs:
        return version
    for name in specs:
        if name.startswith(version + ".") or version.startswith(name):
            return name
    raise ValueError(f"SGLANG_SIM_VERSION={version!r} is not simulated; use one of {', '.join(specs)}")


@dataclass(frozen=True)
class ParsedArgs:
    values: dict[str, Any]     # dest (ServerArgs field) -> value as argparse produced it
    explicit: frozenset[str]   # dests given on the command line


def build_parser(version: str) -> argparse.ArgumentParser:
    spec = _specs()[version]
    parser = argparse.ArgumentParser(prog=spec["prog"], allow_abbrev=True)
    for action in spec["actions"]:
        kwargs: dict[str, Any] = {"dest": action["dest"], "default": argparse.SUPPRESS}
        nargs = action.get("nargs")
        if nargs == 0:
            kwargs["action"] = "store_true"
        else:
            if nargs is not None:
                kwargs["nargs"] = nargs
            if "choices" in action:
                kwargs["choices"] = action["choices"]
            # argparse derives the metavar from the first long option, as SGLang's parser does
            kwargs["metavar"] = None if "choices" in action else action["opts"][0][2:].upper().replace("-", "_")
        if action.get("required"):
            kwargs["required"] = True
        parser.add_argument(*action["opts"], **kwargs)
    return parser


def parse(version: str, argv: list[str]) -> ParsedArgs:
    """Parse like SGLang; on bad input argparse prints usage + error and exits 2, as SGLang does."""
    namespace = build_parser(version).parse_args(argv)
    values = vars(namespace)
    return ParsedArgs(values=dict(values), explicit=frozenset(values))
