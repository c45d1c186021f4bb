"""Thin adapters, one per outside thing; each is the only importer of its library. Used by every flow (through
the runner's bindings, ``deployctl.load`` and ``deployctl.operations``) and by the verbs that read the ledger."""
