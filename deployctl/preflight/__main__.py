"""``python -m deployctl.preflight WHEEL|SITE_PACKAGES VERSION``: print SGLang's flag table as JSON.

This is how the shipped ``deployctl/preflight/flags-<version>.json`` files are made, e.g.
``python -m deployctl.preflight sglang-0.5.23-cp311-…whl 0.5.23 > deployctl/preflight/flags-0.5.23.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from deployctl.preflight.extract import extract_flag_table
from deployctl.preflight.sources import DirSource, SourceTree, WheelSource


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path = Path(argv[0])
    tree: SourceTree = WheelSource(path) if path.suffix == ".whl" else DirSource(path)
    sys.stdout.write(extract_flag_table(tree, argv[1]).to_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
