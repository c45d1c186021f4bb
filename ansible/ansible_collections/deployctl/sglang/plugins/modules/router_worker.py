#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: router_worker
short_description: Take an SGLang worker out of SGLang's router, or put it back
description:
  - Drains a host through SGLang's own router (SGLang Model Gateway, the C(sglang-router) package) before
    its server restarts, and adds it back once it serves again.
  - Speaks the router's worker API (sglang-router 0.3). C(GET /workers) lists them (C(id), C(url),
    C(is_healthy)); C(DELETE /workers/ID) and C(POST /workers) with a JSON body naming the C(url) queue a
    removal or an addition, answered 202. The module waits until the list shows the change done.
  - O(state=absent) then waits O(drain_s) more, so requests the router had already sent the worker finish
    before the restart; O(state=present) waits until the router calls the worker healthy.
  - Idempotent, a worker already absent (or present) is not changed. Run it where the router is
    reachable (usually delegated to localhost).
version_added: "0.2.0"
author: deployctl maintainers
options:
  router:
    description: The router's base URL, for example C(http://10.0.0.5:30000).
    type: str
    required: true
  worker:
    description: The worker's URL as the router knows it, for example C(http://gpu-node-3:30000).
    type: str
    required: true
  state:
    description: C(absent) takes the worker out, C(present) puts it back.
    type: str
    choices: [absent, present]
    default: absent
  timeout_s:
    description: How long to wait for the router to carry out the change.
    type: float
    default: 60
  drain_s:
    description: With O(state=absent), how long to wait after the removal for requests in flight to finish.
    type: float
    default: 5
  api_key:
    description: The router's control-plane key (C(--control-plane-api-keys)), sent as a bearer token.
    type: str
attributes:
  check_mode:
    support: full
"""

EXAMPLES = r"""
- name: Drain the host through the router
  deployctl.sglang.router_worker:
    router: "{{ router_url }}"
    worker: "{{ router_worker_url }}"
    state: absent
  delegate_to: localhost

- name: Serve through the router again
  deployctl.sglang.router_worker:
    router: "{{ router_url }}"
    worker: "{{ router_worker_url }}"
    state: present
  delegate_to: localhost
"""

RETURN = r"""
workers:
  description: The worker URLs the router lists after the change.
  type: list
  elements: str
  returned: always
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

POLL_S = 0.5


def same_url(a, b):
    return a.rstrip("/") == b.rstrip("/")


def call(module, method, path, body=None):
    headers = {"Content-Type": "application/json"}
    if module.params["api_key"]:
        headers["Authorization"] = "Bearer %s" % module.params["api_key"]
    url = module.params["router"].rstrip("/") + path
    try:
        resp = open_url(url, method=method, data=None if body is None else json.dumps(body), headers=headers,
                        timeout=30)
        text = resp.read()
    except Exception as exc:  # the router's answer or its absence: said as the task's error
        module.fail_json(msg="SGLang router %s %s: %s" % (method, url, exc))
    return json.loads(text) if text else {}


def listed(module):
    return call(module, "GET", "/workers").get("workers", [])


def find(workers, url):
    return next((w for w in workers if same_url(w.get("url", ""), url)), None)


def wait_for(module, done, what):
    deadline = time.monotonic() + module.params["timeout_s"]
    while True:
        workers = listed(module)
        if done(workers):
            return workers
        if time.monotonic() > deadline:
            module.fail_json(msg="SGLang router: %s not within %g s" % (what, module.params["timeout_s"]),
                             workers=[w.get("url") for w in workers])
        time.sleep(POLL_S)


def main():
    module = AnsibleModule(argument_spec=dict(
        router=dict(type="str", required=True), worker=dict(type="str", required=True),
        state=dict(type="str", choices=["absent", "present"], default="absent"),
        timeout_s=dict(type="float", default=60), drain_s=dict(type="float", default=5),
        api_key=dict(type="str", no_log=True)), supports_check_mode=True)
    url, state = module.params["worker"], module.params["state"]
    found = find(listed(module), url)
    if (state == "absent") == (found is None):
        module.exit_json(changed=False, workers=[w.get("url") for w in listed(module)])
    if module.check_mode:
        module.exit_json(changed=True, workers=[])
    if state == "absent":
        call(module, "DELETE", "/workers/%s" % found["id"])
        workers = wait_for(module, lambda ws: find(ws, url) is None, "the removal of %s" % url)
        time.sleep(module.params["drain_s"])
    else:
        call(module, "POST", "/workers", {"url": url})
        workers = wait_for(module, lambda ws: (find(ws, url) or {}).get("is_healthy") is True,
                           "%s added and healthy" % url)
    module.exit_json(changed=True, workers=[w.get("url") for w in workers])


if __name__ == "__main__":
    main()
