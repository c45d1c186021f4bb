#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: deployctl_promote
short_description: Promote a profile of an SGLang deployment with deployctl on the host
description:
  - Runs C(deployctl promote PROFILE -d DEPLOYMENT --json) on the managed host. deployctl benchmarks the
    candidate against the baseline, keeps it or rolls back on its own, and records the release in its ledger.
  - The outcome is read from deployctl's exit code. Kept is C(changed). Rejected, rollback failed, refused,
    busy and (unless O(inconclusive=ok)) inconclusive fail the task, with the verdict, reasons and release id.
  - In check mode it runs C(deployctl promote --dry-run) and changes nothing; C(changed) says whether the
    unit would restart, and the plan's profile diff (flags and environment added, removed, changed against
    the installed unit's profile) is the task's diff, shown by C(ansible-playbook --check --diff).
version_added: "0.1.0"
author: deployctl maintainers
extends_documentation_fragment:
  - deployctl.sglang.deployctl
options:
  profile:
    description: The profile to promote.
    type: str
    required: true
  fresh_baseline:
    description: Benchmark the baseline again instead of reusing a recent one from the ledger.
    type: bool
    default: false
  inconclusive:
    description: What an inconclusive verdict (the baseline is kept) does to the task.
    type: str
    choices: [fail, ok]
    default: fail
attributes:
  check_mode:
    support: full
"""

EXAMPLES = r"""
- name: Promote the candidate, one host at a time
  deployctl.sglang.deployctl_promote:
    deployment: glm5
    profile: candidate
  register: promoted

- name: Accept a verdict within noise (the baseline stays)
  deployctl.sglang.deployctl_promote:
    deployment: glm5
    profile: neutral
    inconclusive: ok
"""

RETURN = r"""
result:
  description: deployctl's result (kept, rejected, inconclusive, rollback_failed, ...); C(planned) in check mode.
  type: str
  returned: always
verdict:
  description: The judge's verdict, when it judged.
  type: str
  returned: when benchmarked
reasons:
  description: Why deployctl decided so, one line each.
  type: list
  elements: str
  returned: always
release:
  description: The release id in deployctl's ledger.
  type: int
  returned: when not in check mode
levels:
  description: Throughput at each concurrency level, baseline against candidate, with the change.
  type: list
  elements: dict
  returned: when benchmarked
output:
  description: The output gate's verdict (PASS, FAIL, INCONCLUSIVE), accuracy baseline and candidate, mean KL
    and same top token %, when it ran.
  type: dict
  returned: when the output gate ran
profile_diff:
  description: In check mode, the plan's profile diff, one line each (C(baseline → candidate:), C(+ --flag), ...).
  type: list
  elements: str
  returned: in check mode
exit_code:
  description: deployctl's exit code.
  type: int
  returned: always
outcome:
  description: The whole C(promote --json) document (the C(--dry-run --json) plan in check mode).
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.deployctl.sglang.plugins.module_utils.deployctl import (
    COMMON_ARGS, INCONCLUSIVE, OK, PREFLIGHT_REFUSED, REJECTED, ROLLBACK_FAILED, fail_with_error, run_json)


def plan(module):
    rc, doc, err = run_json(module, "promote", module.params["profile"], "-d", module.params["deployment"],
                            "--dry-run")
    if rc not in (OK, PREFLIGHT_REFUSED) or not isinstance(doc, dict) or "unchanged" not in doc:
        fail_with_error(module, rc, doc, err, "deployctl promote --dry-run")
    if rc == PREFLIGHT_REFUSED:
        module.fail_json(msg="pre-flight would refuse %s" % module.params["profile"], result="refused",
                         exit_code=rc, reasons=[], outcome=doc)
    changed = not doc["unchanged"]
    lines = doc.get("profile_diff", [])
    # Ansible's own modules show a check-mode change as the task's diff: "prepared" is printed as it is.
    said = "%s would restart" % doc["unit"] if changed else "%s unchanged" % doc["unit"]
    module.exit_json(changed=changed, result="planned", exit_code=rc, reasons=[], outcome=doc, profile_diff=lines,
                     diff=dict(prepared="\n".join([said] + ["  %s" % line for line in lines]) + "\n"))


def _output(gate):
    """The output gate's verdict in a line's worth of fields, for the fleet summary."""
    if not gate:
        return None
    acc = gate["accuracy"]
    return {"outcome": gate["outcome"], "accuracy": f"{acc['baseline_right']}/{acc['prompts']} -> "
            f"{acc['candidate_right']}/{acc['prompts']}", "mean_kl": gate["shift"]["mean_kl"],
            "same_top_pct": gate["shift"]["same_top_pct"]}


def promote(module):
    args = ["promote", module.params["profile"], "-d", module.params["deployment"]]
    if module.params["fresh_baseline"]:
        args.append("--fresh-baseline")
    rc, doc, err = run_json(module, *args)
    if not isinstance(doc, dict) or "result" not in doc:
        fail_with_error(module, rc, doc, err, "deployctl promote")
    found = dict(result=doc["result"], verdict=doc.get("verdict"), reasons=doc.get("reasons", []),
                 release=doc.get("release"), levels=doc.get("levels", []), exit_code=rc, outcome=doc,
                 output=_output(doc.get("output")))
    if rc == OK:
        module.exit_json(changed=doc["result"] == "kept", **found)
    if rc == INCONCLUSIVE and module.params["inconclusive"] == "ok":
        module.exit_json(changed=False, **found)
    words = {REJECTED: "rejected and rolled back", INCONCLUSIVE: "inconclusive (the baseline is kept)",
             ROLLBACK_FAILED: "rollback failed: manual action needed"}
    module.fail_json(msg="%s on %s: %s" % (module.params["profile"], module.params["deployment"],
                                           words.get(rc, "deployctl exit %d" % rc)), stderr=err, **found)


def main():
    spec = dict(COMMON_ARGS, profile=dict(type="str", required=True), fresh_baseline=dict(type="bool", default=False),
                inconclusive=dict(type="str", choices=["fail", "ok"], default="fail"))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    if module.check_mode:
        plan(module)
    promote(module)


if __name__ == "__main__":
    main()
