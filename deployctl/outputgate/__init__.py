"""The output gate: does the candidate still say what the baseline said? Pure core (probe set, grading,
top-k KL, McNemar, the verdict); the HTTP client is ``deployctl.adapters.sglang_logprobs``.
Used by promote (the gate before a keep) and the canary (its watch of the live release's answers)."""
