"""The output gate: does the candidate still say what the baseline said? Pure core (probe set, grading,
top-k KL, McNemar, the verdict); the HTTP client is ``deployctl.adapters.sglang_logprobs``."""
