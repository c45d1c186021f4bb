#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: deployctl_facts
short_description: What deployctl knows of an SGLang deployment on the host, as facts
description:
  - Runs C(deployctl status -d DEPLOYMENT --json) and C(deployctl history -d DEPLOYMENT --json) on the
    managed host and sets C(ansible_facts.deployctl) - the live release, the installed profile and unit hash,
    the unit's state and the last promote's verdict - for conditions and reports.
  - With O(host), it checks that deployctl's inventory on the host runs the deployment on that host (pass
    C(inventory_hostname)), and fails otherwise, so that a play that restarts nothing before this check
    never acts on a host whose inventories disagree.
  - Reads only; C(status) first finishes the recovery of a promote whose controller died, as it always does.
  - A host where deployctl never ran (the unit installed, no state directory yet) is read as it is, with
    C(fresh=true) and no live release; the first C(promote) there adopts the installed unit.
version_added: "0.1.0"
author: deployctl maintainers
extends_documentation_fragment:
  - deployctl.sglang.deployctl
options:
  host:
    description: The host name deployctl's inventory must give the deployment (its C(host:) key).
    type: str
attributes:
  check_mode:
    support: full
  facts:
    support: full
"""

EXAMPLES = r"""
- name: The inventories agree (deployctl's knows this host runs glm5)
  deployctl.sglang.deployctl_facts:
    deployment: glm5
    host: "{{ inventory_hostname }}"

- name: Show the live release
  ansible.builtin.debug:
    msg: "{{ ansible_facts.deployctl.live_release }} {{ ansible_facts.deployctl.profile }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts under C(deployctl).
  returned: always
  type: complex
  contains:
    deployctl:
      description: >-
        C(deployment), C(host) (deployctl's inventory's host of it), C(unit), C(active_state),
        C(live_release) (id or null), C(profile) and C(unit_hash) of the installed unit, C(fresh) (no state
        directory yet: deployctl never ran here), and C(last_promote) (C(release), C(profile), C(result),
        C(verdict), C(reasons); null before the first promote).
      type: dict
      returned: always
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.deployctl.sglang.plugins.module_utils.deployctl import (
    COMMON_ARGS, OK, fail_with_error, run_json, state_dir_of)


def last_promote(releases):
    promotes = [r for r in releases if r.get("kind") == "promote"]
    if not promotes:
        return None
    last = max(promotes, key=lambda r: r["id"])
    return dict(release=last["id"], profile=last.get("profile"), result=last.get("result"),
                verdict=last.get("verdict"), reasons=last.get("reasons", []))


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS, host=dict(type="str")), supports_check_mode=True)
    deployment = module.params["deployment"]
    fresh = not os.path.isdir(state_dir_of(module.params))
    if fresh:
        # status refuses a missing state directory (a mistyped --state-dir must not read as "nothing
        # recorded"); here it is a host deployctl never ran on, so its unit is read against an empty one.
        with tempfile.TemporaryDirectory(prefix="deployctl-fresh-") as empty:
            rc, status, err = run_json(module, "status", "-d", deployment, "-n", "0", state_dir=empty)
    else:
        rc, status, err = run_json(module, "status", "-d", deployment, "-n", "0")
    if rc != OK or not isinstance(status, dict):
        fail_with_error(module, rc, status, err, "deployctl status")
    releases = []
    if not fresh:
        rc, releases, err = run_json(module, "history", "-d", deployment)
        if rc != OK or not isinstance(releases, list):
            fail_with_error(module, rc, releases, err, "deployctl history")
    facts = dict(deployment=deployment, host=status.get("host"), unit=status.get("unit"),
                 active_state=status.get("active_state"), live_release=status.get("live_release"),
                 profile=status.get("profile"), unit_hash=status.get("unit_hash"), fresh=fresh,
                 last_promote=last_promote(releases))
    wanted = module.params["host"]
    if wanted and facts["host"] != wanted:
        module.fail_json(msg="deployctl's inventory on this host runs %s on %r, not on %r: make the two "
                             "inventories agree (the Ansible host name is deployctl's hosts: key)"
                             % (deployment, facts["host"], wanted), ansible_facts=dict(deployctl=facts))
    module.exit_json(changed=False, ansible_facts=dict(deployctl=facts))


if __name__ == "__main__":
    main()
