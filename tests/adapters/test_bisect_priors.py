"""Pre-flight's no-op warnings as the bisect's priors, on the demo inventory (pre-flight reads the shipped flag tables)."""

from __future__ import annotations

from deployctl.flows.bisect import likely_harmless
from deployctl.commands.demo import demo_inventory
from deployctl.inventory.model import load_inventory
from deployctl.flows.bisect import search_changes
from deployctl.operations.site import make_site


def test_a_flag_preflight_calls_a_no_op_on_this_gpu_is_a_likely_harmless_change(tmp_path):
    demo_inventory(tmp_path / "inv.yaml")
    site = make_site(load_inventory(tmp_path / "inv.yaml"), "glm5-sim", tmp_path / "state", {})
    changes = search_changes(site, "candidate-forced-fusion", "baseline")
    assert [c.text for c in changes] == ["+ --enable-flashinfer-allreduce-fusion", "+ SGLANG_SIM_FORCE_AR_FUSION=1"]
    # SM120: the fusion flag has no effect (catalogue ar-fusion-no-effect); the environment switch is not judged
    assert likely_harmless(site, "candidate-forced-fusion", changes) == {0}
