"""The Ansible collection's module_utils re-declares deployctl's exit codes and default state directory (it
runs on the managed host with Ansible's Python, where deployctl may live in a venv of its own, so it cannot
import them): this keeps each of its values equal to deployctl's own."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from testpaths import REPO

from deployctl.adapters.ledger import DEFAULT_STATE_DIR
from deployctl.errors import ExitCode

MODULE_UTILS = REPO / "ansible" / "ansible_collections" / "deployctl" / "sglang" / "plugins" / "module_utils" / "deployctl.py"


def collection_utils(path: Path = MODULE_UTILS) -> ModuleType:
    spec = importlib.util.spec_from_file_location("deployctl_sglang_module_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def declared_exit_codes(module: ModuleType) -> dict[str, int]:
    """Every upper-case integer constant of the module: the exit codes it decides on."""
    return {name: value for name, value in vars(module).items()
            if name.isupper() and isinstance(value, int) and not isinstance(value, bool)}


def test_every_exit_code_of_the_collection_is_deployctls() -> None:
    declared = declared_exit_codes(collection_utils())
    assert {"OK", "REJECTED", "INCONCLUSIVE", "ROLLBACK_FAILED", "BUSY"} <= set(declared)
    assert declared == {name: getattr(ExitCode, name, None) for name in declared}


def test_the_collections_default_state_directory_is_deployctls() -> None:
    assert collection_utils().DEFAULT_STATE_DIR == str(DEFAULT_STATE_DIR)


def test_a_drifted_code_is_caught(tmp_path: Path) -> None:
    """The check itself: a collection that says 13 for ROLLBACK_FAILED does not pass."""
    drifted = tmp_path / "deployctl.py"
    drifted.write_text(MODULE_UTILS.read_text().replace("ROLLBACK_FAILED = 12", "ROLLBACK_FAILED = 13"))
    declared = declared_exit_codes(collection_utils(drifted))
    assert declared["ROLLBACK_FAILED"] != ExitCode.ROLLBACK_FAILED
