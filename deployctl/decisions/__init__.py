"""The decisions of every flow, pure (no I/O, no clock): the promote state machine (``machine``, ``state``,
``steps``, ``evidence``, ``decided``), the canary's (``canary``), bisect's search (``bisect_search``,
``bisect_changes``), the dead-man's lease (``dead_man``), and what a release's story says (``report``,
``records``). Used by promote, canary, bisect, rollback and recover; the flows in ``deployctl.flows`` drive them."""
