"""The real SGLang wheels the tests read (never install, never import): fetched once with
``pip download --no-deps --only-binary=:all:`` into ``$DEPLOYCTL_TEST_WHEELS`` (default
``~/.cache/deployctl-test-wheels``; ~52 MB for the four) and reused. ``scripts/bootstrap`` fills the cache
(``python tests/support/sglang_wheels.py``); a test that finds a wheel missing tries the download itself and,
without network, skips, unless CI=true, where it fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Every version the simulator impersonates: the oldest (0.4.10.post2) and newest (0.5.23) supported, and
# those the incidents ran on (0.5.9, 0.5.10; docs/sim.md).
VERSIONS = ("0.4.10.post2", "0.5.9", "0.5.10", "0.5.23")


def cache_dir() -> Path:
    path = Path(os.environ.get("DEPLOYCTL_TEST_WHEELS", Path.home() / ".cache" / "deployctl-test-wheels"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(version: str) -> Path | None:
    found = sorted(cache_dir().glob(f"sglang-{version}-*.whl"))
    return found[0] if found else None


def download(version: str) -> tuple[Path | None, str]:
    """The cached wheel (downloaded when missing) and, when there is none, pip's reason."""
    wheel = cached(version)
    if wheel is not None:
        return wheel, ""
    # 0.5.23 ships per-CPython wheels: ask for the cp311 manylinux one whatever runs the tests.
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.11",
           "--implementation", "cp", "--abi", "cp311", "--platform", "manylinux_2_34_x86_64", "--platform", "any",
           "--retries", "1", "--timeout", "20", "-q", "-d", str(cache_dir()), f"sglang=={version}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    return cached(version), done.stderr.strip()[-300:]


def wheel(version: str) -> Path:
    """The wheel for a test: skips without network (the reason says so), fails under CI=true."""
    import pytest

    found, error = download(version)
    if found is None:
        reason = (f"cannot download the sglang {version} wheel (no network? run scripts/bootstrap where there is "
                  f"one, or put it in {cache_dir()}): {error}")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def main() -> int:
    missing = []
    for version in VERSIONS:
        found, error = download(version)
        if found is None:
            missing.append(f"sglang {version}: {error}")
    for line in missing:
        print(f"bootstrap: could not download {line}; the tests that read it will skip (fail under CI)",
              file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
