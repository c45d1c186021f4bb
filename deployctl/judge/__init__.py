"""The judge, pure: is the candidate better, the same or worse than the baseline, with the noise measured
(``noise``, ``stats``, ``pooling``, ``starts``), per level (``verdict``), with gates and drift; the canary's
watch verdict (``watch``, ``passive``). Used by promote, canary, bisect and the ``judge`` verb."""
