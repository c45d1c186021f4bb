"""The flows: each of promote, canary, bisect, rollback and recover owns its orchestration here, in one place.

A verb (``deployctl.commands``) parses its arguments, calls its flow and prints what came back; a flow wires
the pure decisions (``deployctl.decisions``, ``deployctl.judge``) to the runner (``deployctl.live``), the
load (``deployctl.load``) and systemd (``deployctl.operations``). Where each flow decides:

- promote: keep or roll back — ``deployctl.decisions.machine`` (driven by ``flows.promote`` through ``live.runner``);
- canary: watch the live release, roll back on degraded — ``deployctl.decisions.canary`` (driven by ``flows.canary``);
- bisect: the next subset to try — ``deployctl.decisions.bisect_search`` (driven by ``flows.bisect``);
- recover (and the dead-man's switch): what to do with an unfinished promote — ``flows.recover``;
- rollback: which earlier release goes back — ``flows.rollback``.
"""
