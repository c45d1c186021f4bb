"""What the verbs share at the terminal: the global and per-verb options, loading the inventory named on the
command line, release arguments, plain/JSON output and progress, and running a verb elsewhere (``-H`` over
ssh with the uploaded inventory, ``--in-unit`` as a transient unit). Used by every verb; the
flows use its progress display and ``release_verbs`` (the lock, adoption, the policy's limits)."""
