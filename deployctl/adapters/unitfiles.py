"""Unit files on disk: atomic install, the trial copy, keep/discard, the previous content for rollback.

Where things live (the decision and its evidence are in docs/systemd.md):
- the known-good unit is ``<unit_dir>/NAME`` (default ``/etc/systemd/system``);
- a candidate under trial is a full unit at ``<runtime_dir>/NAME`` (default ``/run/systemd/system.control``),
  which systemd 252 searches *before* ``/etc/systemd/system`` and which is a tmpfs: a reboot in the middle
  of a trial comes back on the known-good unit. (``/run/systemd/system`` would not do: it comes *after*
  ``/etc`` in the search path.)
- keeping a trial writes it to ``unit_dir`` and then removes the runtime copy;
- every overwrite of the known-good unit saves the previous content as ``<backup_dir>/NAME.previous``.

Every write is atomic: a temporary file in the same directory, fsync, rename, fsync of the directory.
The caller reloads systemd after any change (``Systemd.reload``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.errors import InputError, SystemdError
from deployctl.units.stamp import stamp_keys, unit_hash

DEFAULT_UNIT_DIR = Path("/etc/systemd/system")
DEFAULT_RUNTIME_DIR = Path("/run/systemd/system.control")
DEFAULT_BACKUP_DIR = Path("/var/lib/deployctl/units")


@dataclass(frozen=True)
class UnitFile:
    """One unit file as found on disk."""

    path: Path
    text: str
    trial: bool
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def managed(self) -> bool:
        return "Deployment" in self.keys

    @property
    def deployment(self) -> str | None:
        return self.keys.get("Deployment")

    @property
    def profile(self) -> str | None:
        return self.keys.get("Profile")

    @property
    def declared_hash(self) -> str | None:
        return self.keys.get("Hash")

    @property
    def sha256(self) -> str:
        return unit_hash(self.text)


@dataclass(frozen=True)
class Installed:
    """What an install changed: the file written and what it replaced (None: there was none)."""

    path: Path
    previous: str | None


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves either the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path, trial: bool) -> UnitFile | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SystemdError(f"cannot read {path}: {exc.strerror}") from exc
    return UnitFile(path=path, text=text, trial=trial, keys=stamp_keys(text))


class UnitFiles:
    """Unit files of one host, in configurable directories (a sandbox passes its ``/proc/PID/root/...``)."""

    def __init__(
        self,
        unit_dir: Path | str = DEFAULT_UNIT_DIR,
        runtime_dir: Path | str = DEFAULT_RUNTIME_DIR,
        backup_dir: Path | str | None = DEFAULT_BACKUP_DIR,
    ) -> None:
        self.unit_dir = Path(unit_dir)
        self.runtime_dir = Path(runtime_dir)
        self.backup_dir = None if backup_dir is None else Path(backup_dir)

    def known_good(self, name: str) -> UnitFile | None:
        return _read(self.unit_dir / name, trial=False)

    def trial(self, name: str) -> UnitFile | None:
        return _read(self.runtime_dir / name, trial=True)

    def read_installed(self, name: str) -> UnitFile | None:
        """The file systemd loads for ``name`` (after a reload): the trial if there is one."""
        return self.trial(name) or self.known_good(name)

    def previous(self, name: str) -> str | None:
        """The known-good content before the last overwrite, for a rollback."""
        if self.backup_dir is None:
            return None
        try:
            return (self.backup_dir / f"{name}.previous").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _check_may_replace(self, name: str, adopt: bool) -> UnitFile | None:
        current = self.known_good(name)
        if current is not None and not current.managed and not adopt:
            raise InputError(
                f"{current.path} exists and is not managed by deployctl (no X-Deployctl-Deployment= key)",
                hint="pass --adopt to let deployctl take it over; its content is kept as the rollback target",
            )
        return current

    def install(self, name: str, text: str, *, adopt: bool = False) -> Installed:
        """Write ``text`` as the known-good unit (persistent), keeping the previous content for rollback.

        Writing what is there already changes nothing, the backup included: a keep re-run after a crash
        must not back the candidate up over the known-good content it replaced."""
        current = self._check_may_replace(name, adopt)
        if current is not None and current.text == text:
            return Installed(path=current.path, previous=self.previous(name))
        previous = current.text if current else None
        if previous is not None and self.backup_dir is not None:
            atomic_write(self.backup_dir / f"{name}.previous", previous)
        self._write(self.unit_dir / name, text)
        return Installed(path=self.unit_dir / name, previous=previous)

    def install_trial(self, name: str, text: str, *, adopt: bool = False) -> Installed:
        """Write ``text`` as the runtime trial copy, which overrides the known-good one until reboot."""
        self._check_may_replace(name, adopt)
        current = self.trial(name)
        self._write(self.runtime_dir / name, text)
        return Installed(path=self.runtime_dir / name, previous=current.text if current else None)

    def keep(self, name: str, expected_hash: str | None = None) -> Installed:
        """Make the trial the known-good unit: persist it, then remove the runtime copy.

        Idempotent: a keep cut short after the write finds the candidate persisted and only removes the
        trial. With ``expected_hash``, the trial's content must be the planned candidate's, and a trial
        that is gone (a reboot empties /run) is only accepted if the candidate is persisted already."""
        trial = self.trial(name)
        if trial is None:
            current = self.known_good(name)
            if expected_hash is not None and current is not None and current.sha256 == expected_hash:
                return Installed(path=current.path, previous=self.previous(name))
            raise SystemdError(
                f"no trial of {name} in {self.runtime_dir} to keep, and {self.unit_dir / name} is not the candidate"
                " (a reboot or a hand removed the trial; the known-good unit runs)",
                hint="the candidate is not kept; promote it again to try it",
            )
        if expected_hash is not None and trial.sha256 != expected_hash:
            raise SystemdError(
                f"the trial {trial.path} is not the planned candidate (sha256 {trial.sha256[:12]}…, planned"
                f" {expected_hash[:12]}…): it changed since it was installed; not persisting it",
                hint="someone edited the trial by hand; promote the profile again",
            )
        installed = self.install(name, trial.text, adopt=True)
        self.discard_trial(name)
        return installed

    def discard_trial(self, name: str) -> bool:
        """Remove the trial copy (the known-good unit applies again after a reload); False if there was none."""
        path = self.runtime_dir / name
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        _fsync_dir(self.runtime_dir)
        return True

    def restore(self, name: str, text: str) -> Installed:
        """Put ``text`` (e.g. ``previous(name)``) back as the known-good unit."""
        return self.install(name, text, adopt=True)

    @staticmethod
    def _write(path: Path, text: str) -> None:
        try:
            atomic_write(path, text)
        except PermissionError as exc:
            raise SystemdError(
                f"cannot write {path}: permission denied",
                hint="installing unit files needs root (or write access to the unit directory)",
            ) from exc
        except OSError as exc:
            raise SystemdError(f"cannot write {path}: {exc.strerror}") from exc
