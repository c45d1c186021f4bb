"""What the release verbs share: limits from the policy, adoption of the installed unit, the plan, the demo inventory."""

from __future__ import annotations

import pytest

from deployctl.adapters.ledger import Ledger
from deployctl.console.release_verbs import adopt_installed, limits
from deployctl.commands.demo import demo_inventory
from deployctl.errors import InputError
from deployctl.inventory.model import load_inventory
from deployctl.inventory.policy import JudgePolicy, Policy
from deployctl.judge.stalls import MAX_STALL_EXTRA
from deployctl.operations.site import make_site


def test_limits_follow_the_policy():
    lim = limits(Policy(judge=JudgePolicy(min_trials=2, max_trials=5, inconclusive="keep_candidate")), preflight=False)
    # max_trials − min_trials + 1 rounds reach max_trials; MAX_STALL_EXTRA more for trials a stall set aside
    assert lim.bench_rounds == 4 + MAX_STALL_EXTRA and lim.keep_when_inconclusive and not lim.preflight


@pytest.fixture
def site(tmp_path):
    demo_inventory(tmp_path / "inv.yaml")
    env = {"DEPLOYCTL_UNIT_DIR": str(tmp_path / "etc"), "DEPLOYCTL_RUNTIME_UNIT_DIR": str(tmp_path / "run"),
           "DEPLOYCTL_BACKUP_DIR": str(tmp_path / "backup")}
    (tmp_path / "etc").mkdir()
    return make_site(load_inventory(tmp_path / "inv.yaml"), "glm5-sim", tmp_path / "state", env)


def test_demo_inventory_is_valid_with_free_ports(tmp_path):
    data = demo_inventory(tmp_path / "inv.yaml")
    inv = load_inventory(tmp_path / "inv.yaml")
    ports = [d["port"] for d in data["deployments"].values()]
    assert len(set(ports)) == len(ports) and set(inv.deployments) == {"glm5-sim", "qwen35-sim"}


def test_one_deployment_must_be_named_when_there_are_several(site):
    with pytest.raises(InputError, match="say which with -d"):
        make_site(site.inv, None, site.state_dir, {})


def test_plan_needs_a_known_good_unit(site):
    with pytest.raises(InputError, match="not installed"):
        site.plan("candidate")


def test_plan_diffs_against_the_installed_profile_and_adoption_is_recorded_once(site):
    baseline = site.render("baseline")
    site.unit_files().install(baseline.name, baseline.text, adopt=True)
    plan = site.plan("candidate")
    assert not plan.unchanged and "  + --enable-flashinfer-allreduce-fusion" in plan.profile_diff
    assert site.plan("baseline").unchanged
    with Ledger.open(site.state_dir) as ledger:
        first = adopt_installed(ledger, site)
        assert adopt_installed(ledger, site) == first
        assert ledger.get(first).kind == "adopted" and ledger.get(first).profile == "baseline"


def test_a_leftover_trial_is_refused(site):
    baseline = site.render("baseline")
    files = site.unit_files()
    files.install(baseline.name, baseline.text, adopt=True)
    files.install_trial(baseline.name, site.render("candidate").text, adopt=True)
    with pytest.raises(InputError, match="a trial of sglang-glm5-sim.service is installed") as err:
        site.plan("candidate")
    assert "deployctl rollback -d glm5-sim" in err.value.hint


def test_recover_now_does_nothing_where_deployctl_never_ran(site):
    from deployctl.flows.recover import recover_now

    assert recover_now(site, "status") == []
    assert not site.state_dir.exists()


def test_status_reads_the_live_release_without_creating_a_ledger(site):
    from deployctl.console.release_verbs import read_live_release

    assert read_live_release(site) == (None, "live release: none recorded (deployctl has not promoted this deployment yet)")
    assert not site.state_dir.exists()
    baseline = site.render("baseline")
    site.unit_files().install(baseline.name, baseline.text, adopt=True)
    with Ledger.open(site.state_dir) as ledger:
        rid = adopt_installed(ledger, site)
    release, line = read_live_release(site)
    assert release.id == rid and line.startswith(f"live release {rid}: baseline (adopted ") and "differs" not in line
    site.unit_files().install(baseline.name, baseline.text + "# edited\n", adopt=True)
    assert read_live_release(site)[1].endswith("the installed unit differs from it (edited by hand?)")


def test_a_profile_that_is_not_in_the_inventory_plans_like_one(site):
    from deployctl.inventory.model import Profile

    baseline = site.render("baseline")
    site.unit_files().install(baseline.name, baseline.text, adopt=True)
    extra = site.with_profile("candidate-bisect-1", Profile(extends="baseline", flags={"enable-metrics": True,
                                                                                       "disable-radix-cache": None}))
    plan = extra.plan("candidate-bisect-1")
    assert "  + --enable-metrics" in plan.profile_diff and "  - --disable-radix-cache" in plan.profile_diff
    assert "--enable-metrics" in plan.candidate_text and "--disable-radix-cache" not in plan.candidate_text
    assert "candidate-bisect-1" not in site.deployment.profiles  # the inventory itself is untouched
