"""Unit files on disk: atomic install, the trial copy that overrides the known-good one, keep/discard."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.adapters.unitfiles import (
    UnitFiles,
    atomic_write,
)
from deployctl.errors import InputError, SystemdError
from deployctl.units.stamp import stamp_keys, unit_hash


def unit(profile: str, deployment: str = "glm5") -> str:
    return (
        "[Unit]\n"
        f"Description=SGLang {deployment}\n"
        f"X-Deployctl-Deployment={deployment}\n"
        f"X-Deployctl-Profile={profile}\n"
        f"X-Deployctl-Hash={'0' * 64}\n"
        "\n[Service]\nType=exec\nExecStart=/usr/bin/python3 -u -m sglang.launch_server\n"
        "# X-Deployctl-Profile=not-this-one (a comment)\n"
    )


UNMANAGED = "[Unit]\nDescription=hand written\n[Service]\nExecStart=/bin/true\n"
NAME = "sglang-glm5.service"


@pytest.fixture
def files(tmp_path: Path) -> UnitFiles:
    return UnitFiles(tmp_path / "etc", tmp_path / "run", tmp_path / "state")


def test_keys_only_from_the_unit_section() -> None:
    text = unit("baseline") + "[Service]\nX-Deployctl-Profile=ignored\n"
    assert stamp_keys(text) == {"Deployment": "glm5", "Profile": "baseline", "Hash": "0" * 64}
    assert stamp_keys(UNMANAGED) == {}


def test_install_creates_directories_and_leaves_no_temporary_file(files: UnitFiles) -> None:
    installed = files.install(NAME, unit("baseline"))
    assert installed.previous is None
    assert installed.path == files.unit_dir / NAME
    assert sorted(p.name for p in files.unit_dir.iterdir()) == [NAME]
    assert (files.unit_dir / NAME).stat().st_mode & 0o777 == 0o644
    found = files.read_installed(NAME)
    assert found is not None and found.managed and found.profile == "baseline" and not found.trial
    assert found.sha256 == unit_hash(unit("baseline"))


def test_reinstall_keeps_the_previous_content(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    installed = files.install(NAME, unit("fast"))
    assert installed.previous == unit("baseline")
    assert files.previous(NAME) == unit("baseline")
    assert files.known_good(NAME).profile == "fast"  # type: ignore[union-attr]


def test_refuses_an_unmanaged_unit_unless_adopted(files: UnitFiles) -> None:
    files.unit_dir.mkdir(parents=True)
    (files.unit_dir / NAME).write_text(UNMANAGED)
    with pytest.raises(InputError) as err:
        files.install(NAME, unit("baseline"))
    assert "not managed by deployctl" in err.value.message and "--adopt" in (err.value.hint or "")
    with pytest.raises(InputError):
        files.install_trial(NAME, unit("baseline"))
    assert (files.unit_dir / NAME).read_text() == UNMANAGED
    installed = files.install(NAME, unit("baseline"), adopt=True)
    assert installed.previous == UNMANAGED and files.previous(NAME) == UNMANAGED


def test_trial_overrides_then_keep_persists_it(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    files.install_trial(NAME, unit("candidate"))
    assert files.read_installed(NAME).trial  # type: ignore[union-attr]
    assert files.known_good(NAME).profile == "baseline"  # type: ignore[union-attr]
    kept = files.keep(NAME)
    assert kept.previous == unit("baseline")
    assert files.trial(NAME) is None
    assert files.known_good(NAME).profile == "candidate"  # type: ignore[union-attr]
    assert files.previous(NAME) == unit("baseline")


def test_discard_trial_brings_back_the_known_good(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    files.install_trial(NAME, unit("candidate"))
    assert files.discard_trial(NAME) is True
    assert files.discard_trial(NAME) is False
    assert files.read_installed(NAME).profile == "baseline"  # type: ignore[union-attr]


def test_keep_without_a_trial_is_an_error(files: UnitFiles) -> None:
    with pytest.raises(SystemdError):
        files.keep(NAME)


def test_restore_puts_back_any_text(files: UnitFiles) -> None:
    files.install(NAME, unit("fast"))
    files.restore(NAME, UNMANAGED)
    assert files.known_good(NAME).text == UNMANAGED  # type: ignore[union-attr]


def test_atomic_write_failure_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / NAME
    target.write_text("old")

    with pytest.raises(TypeError):
        atomic_write(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == [NAME]


def test_unwritable_directory_says_root_is_needed(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    files = UnitFiles(blocker / "etc", tmp_path / "run", None)
    with pytest.raises(SystemdError):
        files.install(NAME, unit("baseline"))


def test_a_keep_rerun_after_a_crash_keeps_the_known_good_backup(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    files.install_trial(NAME, unit("candidate"))
    planned = unit_hash(unit("candidate"))
    # The first keep wrote /etc and died before removing the trial: the re-run must not back up the candidate.
    files.install(NAME, unit("candidate"), adopt=True)
    files.keep(NAME, planned)
    assert files.previous(NAME) == unit("baseline")
    assert files.trial(NAME) is None and files.known_good(NAME).profile == "candidate"  # type: ignore[union-attr]
    # And once more with the trial gone: the candidate is persisted, so that is a finished keep.
    assert files.keep(NAME, planned).path == files.unit_dir / NAME
    assert files.previous(NAME) == unit("baseline")


def test_a_keep_whose_trial_vanished_refuses_while_the_known_good_is_installed(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    with pytest.raises(SystemdError, match="not the candidate"):
        files.keep(NAME, unit_hash(unit("candidate")))
    assert files.known_good(NAME).profile == "baseline"  # type: ignore[union-attr]


def test_a_keep_refuses_a_trial_that_is_not_the_planned_candidate(files: UnitFiles) -> None:
    files.install(NAME, unit("baseline"))
    files.install_trial(NAME, unit("candidate") + "# edited by hand\n")
    with pytest.raises(SystemdError, match="not the planned candidate"):
        files.keep(NAME, unit_hash(unit("candidate")))
    assert files.known_good(NAME).profile == "baseline"  # type: ignore[union-attr]
