"""``Site`` gathers what every promote-family verb needs about one deployment: the inventory, the policy,
the URL, where systemd and the unit files are (``deployctl.live.restart.Endpoint``: the host's, or a sandbox's
via ``DEPLOYCTL_*`` variables), and the state directory of the ledger.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from deployctl.adapters.lock import DeploymentLock
from deployctl.adapters.unitfiles import UnitFiles, unit_sha256
from deployctl.errors import InputError
from deployctl.inventory.model import (
    Deployment,
    Inventory,
    deployment_policy,
    resolve_profile,
)
from deployctl.inventory.policy import Policy
from deployctl.live.restart import Endpoint
from deployctl.promote.evidence import (
    Plan,
)
from deployctl.units.render import RenderedUnit, render_unit


@dataclass(frozen=True)
class Site:
    inv: Inventory
    deployment: Deployment
    policy: Policy
    endpoint: Endpoint
    state_dir: Path
    default_python: str = sys.executable

    @property
    def name(self) -> str:
        return self.deployment.name

    @property
    def unit(self) -> str:
        return self.deployment.unit

    @property
    def simulated(self) -> bool:
        return bool(self.inv.host_of(self.deployment).simulated)

    @property
    def url(self) -> str:
        address = "127.0.0.1" if self.simulated else self.inv.host_of(self.deployment).address
        return f"http://{address}:{self.deployment.port}"

    @property
    def host(self) -> str:
        return self.deployment.host

    def unit_files(self) -> UnitFiles:
        return self.endpoint.unit_files()

    def lock(self) -> DeploymentLock:
        """The lock of this deployment's unit: one per unit on the host, whatever the state directory."""
        return self.endpoint.lock(self.unit, self.name)

    def render(self, profile: str) -> RenderedUnit:
        return render_unit(self.inv, self.deployment, profile, default_python=self.default_python)

    def plan(self, profile: str, *, need_known_good: bool = True) -> Plan:
        """Render ``profile`` and compare it with the known-good unit installed now.

        ``need_known_good=False`` (``--dry-run``) plans even where nothing is installed yet."""
        rendered = self.render(profile)
        self.refuse_leftover_trial()
        files = self.unit_files()
        known = files.known_good(self.unit)
        if known is None and need_known_good:
            raise InputError(
                f"{self.unit} is not installed: a promote needs a known-good unit to fall back to",
                hint=f"install the baseline first: `deployctl restart {self.name} --profile baseline`",
            )
        resolved = resolve_profile(self.inv, self.deployment, profile)
        return Plan(
            deployment=self.name, profile=profile, unit_name=self.unit, candidate_text=rendered.text,
            candidate_hash=unit_sha256(rendered.text), known_good_text=known.text if known else None,
            known_good_hash=unit_sha256(known.text) if known else None, url=self.url, policy=self.policy,
            host=self.host, flags=resolved.flags, env=resolved.env,
            **self._profile_diff(known.profile if known else None, profile, installed=known is not None),
        )

    def refuse_leftover_trial(self) -> None:
        """``InputError`` when a trial is installed: the caller holds the lock, so its promote is unfinished."""
        trial = self.unit_files().trial(self.unit)
        if trial is not None:
            raise InputError(
                f"a trial of {self.unit} is installed ({trial.path}) but no promote of {self.name} is running",
                hint=f"`deployctl rollback -d {self.name}` removes it and restarts the known-good unit",
            )

    def _profile_diff(self, installed_profile: str | None, profile: str, *, installed: bool = True) -> dict[str, Any]:
        from deployctl.units.profilediff import diff_profiles, format_profile_diff

        if not installed:
            return {"profile_diff": (f"(nothing installed as {self.unit} yet: a promote needs a known-good unit;"
                                     f" `deployctl restart {self.name} --profile baseline` installs one)",)}
        if not installed_profile or installed_profile not in self.deployment.profiles:
            return {"profile_diff": (f"(the installed unit's profile {installed_profile or '?'} is not in the inventory)",)}
        diff = diff_profiles(resolve_profile(self.inv, self.deployment, installed_profile),
                             resolve_profile(self.inv, self.deployment, profile))
        lines = [f"{installed_profile} → {profile}:", *format_profile_diff(diff)]
        return {"profile_diff": tuple(lines), "profile_diff_data": diff}

    def known_good_plan(self, text: str | None = None) -> Plan:
        """A plan whose only purpose is to bring the known-good unit back (rollback, recovery)."""
        files = self.unit_files()
        known = files.known_good(self.unit)
        text = text if text is not None else (known.text if known else None)
        if text is None:
            raise InputError(f"no known-good {self.unit} to restore", hint="install the baseline first")
        h = unit_sha256(text)
        profile = (known.profile if known else None) or "known-good"
        return Plan(deployment=self.name, profile=profile, unit_name=self.unit, candidate_text=text, candidate_hash=h,
                    known_good_text=text, known_good_hash=h, url=self.url, policy=self.policy, host=self.host)


def make_site(inv: Inventory, deployment: str | None, state_dir: Path, env: Mapping[str, str] | None = None) -> Site:
    """The deployment named, or the only one; ``env`` supplies the ``DEPLOYCTL_*`` endpoint overrides."""
    env = dict(os.environ if env is None else env)
    if deployment is None:
        if len(inv.deployments) != 1:
            known = ", ".join(inv.deployments)
            raise InputError(f"the inventory has {len(inv.deployments)} deployments: say which with -d ({known})")
        deployment = next(iter(inv.deployments))
    dep = inv.deployment(deployment)
    return Site(inv, dep, deployment_policy(inv, dep), Endpoint.from_env(env), Path(state_dir))


# --- Units ------------------------------------------------------------------------------------------


# --- Startup ----------------------------------------------------------------------------------------


# --- Bench ------------------------------------------------------------------------------------------


# --- Judge ------------------------------------------------------------------------------------------


# --- Preflight --------------------------------------------------------------------------------------


# --- assembly -----------------------------------------------------------------------------------------


