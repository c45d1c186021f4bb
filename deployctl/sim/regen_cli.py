"""Regenerate cli.json (the simulator's per-version argparse) from the preflight flag tables.

The tables deployctl/preflight/flags-<version>.json were extracted from the real SGLang wheels; the
simulator must accept exactly their option strings, choices, nargs and switch-ness. The simulator may
not import the controller, so this script reads the JSON files by path and writes a trimmed copy:

    .venv/bin/python -m deployctl.sim.regen_cli
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PREFLIGHT = Path(__file__).resolve().parent.parent / "preflight"
_OUT = Path(__file__).with_name("cli.json")
VERSIONS = ("0.5.9", "0.5.10", "0.5.23", "0.4.10.post2")  # first = order kept from the old file

# SGLang's custom actions, reduced to what argparse needs to parse and fail the same way.
_KIND = {
    "store": "store",
    "LoRAPathAction": "store",
    "DeprecatedStoreConstAction": "store",
    "store_true": "store_true",
    "DeprecatedStoreTrueAction": "store_true",
    "BooleanOptionalAction": "boolean_optional",
    "DeprecatedAction": "deprecated",  # SGLang's raises ValueError(help) when given
}
_TYPES = {"int", "float"}  # the others (json, human_readable_int, …) are checked after parsing


def convert(table: dict[str, Any]) -> dict[str, Any]:
    actions = []
    for flag in table["flags"]:
        if flag["action"] == "help":
            continue  # argparse adds -h/--help itself, first, as in SGLang's parser
        kind = _KIND[flag["action"]]
        entry: dict[str, Any] = {"opts": flag["option_strings"], "dest": flag["dest"], "action": kind}
        if kind == "store" and flag["nargs"] is not None:
            entry["nargs"] = flag["nargs"]
        if kind == "store" and flag.get("value_type") in _TYPES:
            entry["type"] = flag["value_type"]
        if kind == "store" and flag.get("choices") is not None:
            entry["choices"] = flag["choices"]
        if flag.get("required"):
            entry["required"] = True
        actions.append(entry)
    return {"prog": table["prog"], "actions": actions}


def build() -> dict[str, Any]:
    out = {}
    for version in VERSIONS:
        table = json.loads((_PREFLIGHT / f"flags-{version}.json").read_text(encoding="utf-8"))
        out[version] = convert(table)
    return out


def main() -> None:
    _OUT.write_text(json.dumps(build(), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {_OUT}")


if __name__ == "__main__":
    main()
