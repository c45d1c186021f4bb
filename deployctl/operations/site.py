"""``Site`` gathers what every promote-family verb needs about one deployment: the inventory, the policy,
the URL, where systemd and the unit files are (``deployctl.operations.restart.Endpoint``: the host's, or a sandbox's
via ``DEPLOYCTL_*`` variables), and the state directory of the ledger and locks; ``Site.plan_for`` builds
every ``Plan`` (promote, rollback, recovery) and ``server_url`` is the one rule for where the server answers.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from deployctl.adapters.envfile import environment_value
from deployctl.adapters.lock import DeploymentLock
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.errors import InputError
from deployctl.inventory.model import (
    EnvRef,
    Deployment,
    Host,
    Inventory,
    Profile,
    deployment_policy,
    resolve_profile,
)
from deployctl.inventory.policy import Policy
from deployctl.operations.restart import Endpoint
from deployctl.decisions.evidence import Plan
from deployctl.units.profilediff import ProfileDiff, diff_profiles, format_profile_diff
from deployctl.units.render import RenderedUnit, render_unit
from deployctl.units.stamp import unit_hash

_LOCAL = ("localhost", "127.0.0.1", "::1")


def server_url(host: Host, port: int) -> str:
    """Where the controller reaches a deployment's server: the one rule for promote, bench and startup-report.

    A simulated host runs the simulator next to the controller; a local name is spelled 127.0.0.1 so a
    server listening on IPv4 only is not missed through ``localhost`` → ``::1``."""
    address = "127.0.0.1" if host.simulated or host.address in _LOCAL else host.address
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


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
        return server_url(self.inv.host_of(self.deployment), self.deployment.port)

    @property
    def host(self) -> str:
        return self.deployment.host

    def unit_files(self) -> UnitFiles:
        return self.endpoint.unit_files()

    def api_key(self) -> str | None:
        """The key the server wants from its HTTP clients: ``--api-key {env: NAME}`` in any of the
        deployment's profiles, read from its EnvironmentFile (never from the inventory or the unit)."""
        names = [ref.name for p in self.deployment.profiles.values()
                 if isinstance(ref := p.flags.get("api-key"), EnvRef)]
        if not names or not self.deployment.environment_file:
            return None
        return environment_value(self.deployment.environment_file, names[0])

    def lock(self) -> DeploymentLock:
        """The lock of this deployment's unit: one per unit on the host, whatever the state directory."""
        return self.endpoint.lock(self.unit, self.name)

    def render(self, profile: str) -> RenderedUnit:
        return render_unit(self.inv, self.deployment, profile, default_python=self.default_python)

    def plan_for(self, profile: str, candidate_text: str, known_good_text: str | None, *,
                 candidate_hash: str | None = None, known_good_hash: str | None = None,
                 unit_name: str | None = None, **details: Any) -> Plan:
        """The one builder of a ``Plan``: this deployment's unit, URL, policy and host around two unit texts.

        A hash given explicitly is one the ledger recorded (the text may be redacted there); otherwise the
        text's own ``unit_hash``. ``details``: the profile's flags, env and diff, where there is a profile."""
        return Plan(
            deployment=self.name, profile=profile, unit_name=unit_name or self.unit, candidate_text=candidate_text,
            candidate_hash=candidate_hash or unit_hash(candidate_text), known_good_text=known_good_text,
            known_good_hash=known_good_hash or (unit_hash(known_good_text) if known_good_text is not None else None),
            url=self.url, policy=self.policy, host=self.host, **details,
        )

    def plan(self, profile: str, *, need_known_good: bool = True) -> Plan:
        """Render ``profile`` and compare it with the known-good unit installed now.

        ``need_known_good=False`` (``--dry-run``) plans even where nothing is installed yet."""
        rendered = self.render(profile)
        self.refuse_leftover_trial()
        known = self.unit_files().known_good(self.unit)
        if known is None and need_known_good:
            raise InputError(
                f"{self.unit} is not installed: a promote needs a known-good unit to fall back to",
                hint=f"install the baseline first: `deployctl restart {self.name} --profile baseline`",
            )
        resolved = resolve_profile(self.inv, self.deployment, profile)
        lines, diff = self._profile_diff(known.profile if known else None, profile, installed=known is not None)
        return self.plan_for(profile, rendered.text, known.text if known else None, flags=resolved.flags,
                             env=resolved.env, profile_diff=lines, profile_diff_data=diff)

    def with_profile(self, name: str, profile: Profile) -> "Site":
        """This site with one profile more than the inventory file has (a bisect's intermediate profile,
        written as the live profile plus some changes): it renders, plans and diffs like any other."""
        dep = self.deployment.model_copy(update={"profiles": {**self.deployment.profiles, name: profile}})
        inv = self.inv.model_copy(update={"deployments": {**self.inv.deployments, self.name: dep}})
        return replace(self, inv=inv, deployment=dep)

    def refuse_leftover_trial(self) -> None:
        """``InputError`` when a trial is installed: the caller holds the lock, so its promote is unfinished."""
        trial = self.unit_files().trial(self.unit)
        if trial is not None:
            raise InputError(
                f"a trial of {self.unit} is installed ({trial.path}) but no promote of {self.name} is running",
                hint=f"`deployctl rollback -d {self.name}` removes it and restarts the known-good unit",
            )

    def _profile_diff(self, installed_profile: str | None, profile: str, *,
                      installed: bool = True) -> tuple[tuple[str, ...], ProfileDiff | None]:
        if not installed:
            return (f"(nothing installed as {self.unit} yet: a promote needs a known-good unit;"
                    f" `deployctl restart {self.name} --profile baseline` installs one)",), None
        if not installed_profile or installed_profile not in self.deployment.profiles:
            return (f"(the installed unit's profile {installed_profile or '?'} is not in the inventory)",), None
        diff = diff_profiles(resolve_profile(self.inv, self.deployment, installed_profile),
                             resolve_profile(self.inv, self.deployment, profile))
        return (f"{installed_profile} → {profile}:", *format_profile_diff(diff)), diff

    def known_good_plan(self, text: str | None = None) -> Plan:
        """A plan whose only purpose is to bring the known-good unit back (rollback, recovery)."""
        known = self.unit_files().known_good(self.unit)
        text = text if text is not None else (known.text if known else None)
        if text is None:
            raise InputError(f"no known-good {self.unit} to restore", hint="install the baseline first")
        return self.plan_for((known.profile if known else None) or "known-good", text, text)


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
