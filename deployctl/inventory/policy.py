"""The promotion policy: how to benchmark, how to judge, which startup facts gate a candidate.

Lives in the inventory under ``policy:`` (global) and may be overridden per deployment under
``deployments.NAME.policy:``. Every field has a default sensible for the incident hardware (PCIe-only
RTX PRO 6000 hosts, 1000-in/1000-out sweeps), so an inventory without a policy block still works.
Unknown keys are errors, like everywhere in the inventory.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Metric = Literal["output_tok_s", "per_request_tok_s", "ttft_p99_s", "itl_p99_s", "e2e_p50_s"]


class BenchPolicy(_Strict):
    """What one benchmark sweep sends."""

    concurrency: list[int] = Field(default=[1, 4, 16, 32, 64], min_length=1)
    input_tokens: int = Field(default=1000, gt=0)
    output_tokens: int = Field(default=1000, gt=0)
    # None → max(4, 2 × C) requests per level, as the operators ran it.
    requests_per_level: int | None = Field(default=None, gt=0)
    warmup_requests: int = Field(default=2, ge=0)
    max_failure_rate: float = Field(default=0.02, ge=0, le=1)
    request_timeout_s: float = Field(default=600.0, gt=0)

    @model_validator(mode="after")
    def _levels_positive(self) -> "BenchPolicy":
        if any(c <= 0 for c in self.concurrency):
            raise ValueError("concurrency levels must be positive integers")
        return self

    def requests_for(self, concurrency: int) -> int:
        return self.requests_per_level or max(4, 2 * concurrency)


class LevelRule(_Strict):
    """How one concurrency level counts in the verdict."""

    limit_pct: float | None = Field(default=None, description="allowed regression in %, e.g. 5 for −5 %")
    role: Literal["critical", "advisory"] = "critical"


class JudgePolicy(_Strict):
    """Noise-aware comparison of a candidate's sweep with the baseline's."""

    metric: Metric = "output_tok_s"
    limit_pct: float = Field(default=5.0, gt=0, description="a regression beyond this many % fails a level")
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="of the interval each verdict line shows")
    # The sequential test's two error rates, each spent over all the looks (deployctl.judge.sequential).
    false_fail: float = Field(default=0.01, gt=0, lt=0.5, description="chance of failing an unchanged candidate")
    miss: float = Field(default=0.05, gt=0, lt=0.5, description="chance of passing a regression of twice the limit")
    min_trials: int = Field(default=2, ge=1)
    max_trials: int = Field(default=5, ge=1)
    # The baseline cannot be measured again once the candidate runs, so every look's precision rests on
    # its count. None → rounds: min_trials, then one more a round where the spread so far (pooled over the
    # levels, with the learned noise) says so (deployctl.judge.noise.baseline_plan; docs/judge.md).
    baseline_trials: int | None = Field(default=None, ge=1, description="trials per level of the baseline")
    levels: dict[int, LevelRule] = Field(default_factory=dict, description="per-concurrency overrides")
    ttft_p99_limit_pct: float | None = Field(default=None, gt=0)
    itl_p99_limit_pct: float | None = Field(default=None, gt=0)
    inconclusive: Literal["keep_baseline", "keep_candidate"] = "keep_baseline"

    @model_validator(mode="after")
    def _trials_ordered(self) -> "JudgePolicy":
        if self.max_trials < self.min_trials:
            raise ValueError(f"max_trials ({self.max_trials}) is below min_trials ({self.min_trials})")
        return self

    def rule_for(self, concurrency: int) -> LevelRule:
        rule = self.levels.get(concurrency, LevelRule())
        if rule.limit_pct is None:
            rule = rule.model_copy(update={"limit_pct": self.limit_pct})
        return rule


class OutputGatePolicy(_Strict):
    """The output gate (``deployctl.outputgate``, docs/output-gate.md): the candidate answers the shipped
    probe prompts greedily and scores the baseline's answers; a clear accuracy drop or a distribution
    shift far above the server's own A/A noise rejects it ("output changed: …")."""

    enabled: bool = Field(default=True, description="false: no output check (`--skip-output-gate` per run)")
    # before_keep: after a passing verdict (a slow candidate never pays for it); first: right after the
    # startup gates, before the sweep (a wrong candidate never pays for the sweep; the gate costs less).
    run: Literal["before_keep", "first"] = "before_keep"
    # None: the whole probe set; fewer: the same stratified subset every time (tests, slow models).
    probes: int | None = Field(default=None, ge=4, description="how many probe prompts to send")
    max_new_tokens: int = Field(default=24, ge=4, le=512, description="greedy tokens per prompt")
    top_k: int = Field(default=5, ge=1, le=20, description="top log-probabilities per token (the KL's support)")
    concurrency: int = Field(default=16, ge=1, le=256, description="probe requests in flight")
    # McNemar's exact test on the checkable prompts: fail when the candidate is worse at this significance.
    accuracy_alpha: float = Field(default=0.01, gt=0, lt=0.5)
    # Limits far above an A/A (simulated floor ~1e-5; llama.cpp: Q8_0 0.0002, Q5_K_M 0.005, IQ3_M 0.07 mean KLD).
    max_mean_kl: float = Field(default=0.05, gt=0, description="mean per-token top-k KL divergence (nats)")
    min_same_top_pct: float = Field(default=90.0, gt=0, le=100, description="the candidate's argmax is the baseline's token")
    # The A/A floor must sit this far below the limits, else the gate cannot tell and says INCONCLUSIVE.
    floor_margin: float = Field(default=3.0, ge=1)
    max_failed_pct: float = Field(default=5.0, ge=0, le=100, description="probe requests that may fail")
    # The canary's watch asks the live release this many probes (its answers at the first watch are the
    # reference); answers that changed make it degraded. None: the watch does not look at outputs.
    watch_probes: int | None = Field(default=32, ge=4, description="probe prompts of each canary watch")


class StartupGates(_Strict):
    """Facts from the startup log that fail a candidate before any benchmark request (and, under
    ``output:``, the output gate's policy)."""

    max_running_requests_drop_pct: float | None = Field(default=10.0, ge=0)
    max_total_num_tokens_drop_pct: float | None = Field(default=25.0, ge=0)
    cuda_graph_must_stay_enabled: bool = True
    new_failure_warnings: bool = True
    startup_timeout_s: float = Field(default=1800.0, gt=0, description="from restart to ready")
    output: OutputGatePolicy = Field(default_factory=OutputGatePolicy)


class WebhookPolicy(_Strict):
    """Where the canary reports degraded / promoted / rejected / rollback failed (Slack-compatible JSON)."""

    url: str = Field(pattern=r"^https?://", description="the endpoint; POSTed JSON with a `text` field")
    # Never the secret itself: the inventory is not a secret store. The body is signed with it (HMAC-SHA256).
    secret_file: str | None = Field(default=None, description="file holding the signing secret")
    attempts: int = Field(default=3, ge=1, le=10)
    timeout_s: float = Field(default=5.0, gt=0, le=60)


class PrometheusSource(_Strict):
    """A Prometheus server that scrapes the deployment's SGLang: the passive watch reads its query API
    instead of the server's /metrics (a window back from now, no waiting)."""

    url: str = Field(pattern=r"^https?://", description="the Prometheus server, e.g. http://prometheus:9090")
    # PromQL label matchers that pick this deployment's server out of all it scrapes
    selector: str = Field(default="", description='e.g. job="sglang",instance="gpu1:30000"',
                          pattern=r'^[^{}\n]*$')


class CanaryPolicy(_Strict):
    """The scheduled canary (``deployctl canary``): watch the live release, try a pending candidate."""

    profile: str | None = Field(default=None, description="the pending candidate to try, e.g. candidate")
    # "02:00-05:00" every day, or "Sat,Sun 01:00-06:00"; host-local time. None: any time.
    window: str | None = Field(default=None, pattern=r"^((Mon|Tue|Wed|Thu|Fri|Sat|Sun)(,(Mon|Tue|Wed|Thu|Fri|Sat|Sun))* )?"
                                                     r"([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$")
    # The watch's levels (a subset of bench.concurrency keeps it short); None: all of them.
    levels: list[int] | None = Field(default=None, min_length=1)
    # A degraded live release alerts; "rollback" also tries the release it replaced and keeps that one only
    # if it measures better now (deployctl.judge.improvement), inside the window.
    on_degraded: Literal["alert", "rollback"] = "alert"
    # A step in the watch series at least this large (a drop) marks the release degraded.
    change_min_pct: float = Field(default=2.0, gt=0)
    change_max_pvalue: float = Field(default=0.001, gt=0, lt=1)
    # An unclear watch (the judge could not decide) arms a one-shot timer that runs the installed canary
    # again this much later, instead of waiting for the next scheduled run.
    unclear_recheck_s: float = Field(default=900.0, ge=60)
    # The passive watch reads the server's /metrics over this window (judge.max_trials sub-windows); only a
    # server that served nobody over it gets the synthetic sweep.
    passive_window_s: float = Field(default=60.0, ge=2)
    # Read the passive window from this Prometheus server (its query API) rather than the server's /metrics;
    # the window should span two of its scrape intervals per judge trial.
    prometheus: PrometheusSource | None = None
    webhook: WebhookPolicy | None = None


class BisectPolicy(_Strict):
    """The budget of ``deployctl bisect``: it stops (the known-good unit running) when either is spent."""

    max_restarts: int = Field(default=24, ge=2, description="restarts of the unit, rollbacks included")
    max_bench_s: float = Field(default=1800.0, gt=0, description="benchmark traffic, in seconds")


class Policy(_Strict):
    bench: BenchPolicy = Field(default_factory=BenchPolicy)
    judge: JudgePolicy = Field(default_factory=JudgePolicy)
    gates: StartupGates = Field(default_factory=StartupGates)
    # A rollback verifies the restored baseline with a short sweep at these levels.
    verify_concurrency: list[int] = Field(default=[1, 16], min_length=1)
    # The dead-man's switch (deployctl.decisions.dead_man): a controller with no progress (no step, no finished
    # request) for dead_man_s is stopped. None → the startup or request timeout, whichever is longer, + 60 s.
    dead_man_s: float | None = Field(default=None, gt=0)
    # How often PID 1 checks that the controller lives: a dead one's candidate serves at most this long.
    dead_man_check_s: float = Field(default=30.0, ge=1, le=600)
    canary: CanaryPolicy = Field(default_factory=CanaryPolicy)
    bisect: BisectPolicy = Field(default_factory=BisectPolicy)

    @model_validator(mode="after")
    def _canary_levels_measured(self) -> "Policy":
        extra = sorted(set(self.canary.levels or ()) - set(self.bench.concurrency))
        if extra:
            raise ValueError(f"canary.levels {extra} are not in bench.concurrency {self.bench.concurrency}: "
                             "a watch is compared with the release's own sweep at the same levels")
        return self
