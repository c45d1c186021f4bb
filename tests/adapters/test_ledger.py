"""The ledger: releases, intents before outcomes, benchmark reuse, secrets never stored."""

from __future__ import annotations

import sqlite3

import pytest
from support.promote import bench, startup

from deployctl.adapters.ledger import Ledger, resolve_state_dir, who_from_env
from deployctl.adapters.ledger.schema import LEDGER_VERSION, SCHEMA
from deployctl.errors import InputError
from deployctl.facts.secrets import REDACTED, redact_mapping, redact_text
from deployctl.decisions.canary import ServerStart, WatchStart

NO_LEVELS = bench({})

UNIT = """[Service]
Environment=PYTHONUNBUFFERED=1
Environment="HF_TOKEN=hf_abc123" "NCCL_P2P_LEVEL=5"
Environment=OPENAI_API_KEY=sk-secret
ExecStart=/usr/bin/python -u -m sglang.launch_server --api-key sk-live-999 --port 8000
"""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def ledger(tmp_path, clock):
    with Ledger.open(tmp_path, clock=clock) as led:
        yield led


def _begin(ledger, **kw):
    args = dict(deployment="glm5", kind="promote", unit_name="sglang-glm5.service", unit_text=UNIT,
                unit_hash="h1", who="alice (sudo)", profile="candidate")
    args.update(kw)
    return ledger.begin_release(**args)


def test_secrets_are_redacted_everywhere(ledger, tmp_path):
    rid = _begin(ledger, env={"HF_TOKEN": "hf_abc123", "NCCL_P2P_LEVEL": "5"}, flags={"api-key": "sk-live-999", "tp": 8})
    release = ledger.get(rid)
    assert release.env == {"HF_TOKEN": REDACTED, "NCCL_P2P_LEVEL": "5"}
    assert release.flags == {"api-key": REDACTED, "tp": 8}
    assert release.redacted and "NCCL_P2P_LEVEL=5" in release.unit_text
    raw = (tmp_path / "ledger.sqlite3").read_bytes() + (tmp_path / "ledger.sqlite3-wal").read_bytes()
    for secret in (b"hf_abc123", b"sk-secret", b"sk-live-999"):
        assert secret not in raw


def test_redaction_keeps_ordinary_lines():
    text = "[Service]\nEnvironment=OMP_NUM_THREADS=8\nExecStart=/x --tp 8\n"
    assert redact_text(text) == text
    assert redact_mapping({"PASSWORD_FILE": "/p", "A": "b"}) == {"PASSWORD_FILE": REDACTED, "A": "b"}


def test_wal_mode(tmp_path, ledger):
    mode = sqlite3.connect(tmp_path / "ledger.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_release_life_cycle(ledger, clock):
    rid = _begin(ledger, pid=42)
    assert [r.id for r in ledger.unfinished("glm5")] == [rid]
    ledger.record(rid, "INSTALL", "intent", "InstallTrial", {"unit": "sglang-glm5.service"})
    ledger.save_state(rid, {"phase": "INSTALL", "x": 1})
    ledger.record(rid, "INSTALL", "outcome", "Succeeded")
    ledger.save_startup(rid, "candidate", startup(26))
    clock.now = 1010
    ledger.finish(rid, result="rejected", verdict="FAIL", reasons=["C=64 −87 %"])
    release = ledger.get(rid)
    assert release.finished and release.result == "rejected" and release.reasons == ["C=64 −87 %"]
    assert release.phase == "INSTALL" and release.state == {"phase": "INSTALL", "x": 1}
    assert release.startup == startup(26).to_dict() and release.startup["max_running_requests"] == 26
    assert [(e.kind, e.name) for e in ledger.events(rid)] == [("intent", "InstallTrial"), ("outcome", "Succeeded")]
    assert ledger.unfinished("glm5") == []


def test_live_release_moves(ledger):
    first = _begin(ledger, kind="adopted", finished=True, live=True, unit_hash="h0")
    second = _begin(ledger, unit_hash="h1")
    assert ledger.live_release("glm5").id == first
    ledger.mark_live(second)
    assert ledger.live_release("glm5").id == second
    assert not ledger.get(first).live
    assert ledger.live_release("other") is None
    assert ledger.release_with_hash("glm5", "h0").id == first


def test_history_newest_first(ledger):
    ids = [_begin(ledger) for _ in range(3)] + [_begin(ledger, deployment="qwen")]
    assert [r.id for r in ledger.history("glm5")] == ids[2::-1]
    assert len(ledger.history()) == 4


def test_unknown_release_is_bad_input(ledger):
    with pytest.raises(InputError):
        ledger.get(99)


def test_fresh_baseline_reuse(ledger, clock):
    rid = _begin(ledger)
    ledger.save_bench(rid, "baseline", NO_LEVELS, unit_hash="h0", bench_key="k", host="h", sglang_version="0.5.10")
    ledger.save_bench(rid, "candidate", NO_LEVELS, unit_hash="h1", bench_key="k", host="h", sglang_version="0.5.10")
    find = dict(unit_hash="h0", bench_key="k", host="h", sglang_version="0.5.10", max_age_s=600)
    assert ledger.fresh_baseline(**find).bench == NO_LEVELS
    assert ledger.fresh_baseline(**{**find, "sglang_version": "0.5.9"}) is None
    assert ledger.fresh_baseline(**{**find, "bench_key": "other"}) is None
    assert ledger.fresh_baseline(**{**find, "unit_hash": "h1"}) is None  # candidates never count
    clock.now += 601
    assert ledger.fresh_baseline(**find) is None
    assert [b.role for b in ledger.benches(rid)] == ["baseline", "candidate"]


def test_aa_benches_are_this_deployments_unchanged_measurements_oldest_first(ledger, clock):
    older, newer, judged, other = _begin(ledger), _begin(ledger), _begin(ledger), _begin(ledger, deployment="qwen")
    for rid, role, host in ((older, "baseline", "h"), (newer, "verify", "h"), (newer, "candidate", "h"),
                            (newer, "watch", "h"), (judged, "baseline", "h"), (other, "baseline", "h"),
                            (older, "baseline", "elsewhere")):
        clock.now += 1
        ledger.save_bench(rid, role, NO_LEVELS, unit_hash="u", bench_key="k", host=host)
    found = ledger.aa_benches(deployment="glm5", host="h", bench_key="k", exclude_releases=(judged,))
    # a candidate's trials are not of an unchanged release; a canary watch's are
    assert [(b.release_id, b.role) for b in found] == [(older, "baseline"), (newer, "verify"), (newer, "watch")]
    assert ledger.aa_benches(deployment="glm5", host="h", bench_key="k", exclude_releases=(), limit=1)[0].release_id == judged
    assert ledger.aa_benches(deployment="glm5", host="h", bench_key="other", exclude_releases=()) == []


def test_restart_pairs_are_one_unit_on_two_starts_oldest_first(ledger, clock):
    rolled, aa, changed, over, judged = (_begin(ledger) for _ in range(5))
    for rid, role, unit, key in ((rolled, "baseline", "u", "k"), (rolled, "verify", "u", "verify:[1]"),
                                 (aa, "baseline", "u", "k"), (aa, "candidate", "u", "k"), (aa, "candidate", "u", "k"),
                                 (changed, "baseline", "u", "k"), (changed, "candidate", "v", "k"),
                                 (over, "baseline", "u", "k"), (over, "candidate", "v", "k"), (over, "candidate", "v", "k"),
                                 (over, "candidate-restart", "v", "candidate-restart:[8]"),
                                 (judged, "baseline", "u", "k"), (judged, "verify", "u", "verify:[1]"),
                                 (judged, "candidate", "v", "k"), (judged, "candidate-restart", "v", "c:[8]")):
        clock.now += 1
        ledger.save_bench(rid, role, NO_LEVELS, unit_hash=unit, bench_key=key, host="h")
    found = ledger.restart_pairs(deployment="glm5", host="h", bench_key="k", exclude_releases=(judged,))
    # a rollback's verification; an A/A promote's candidate (its latest round); not another unit's candidate;
    # a candidate restarted in place to decide over server starts (C1, its latest round, and C2)
    assert [(p.before.release_id, p.before.role, p.after.role, p.source.one) for p in found] == [
        (rolled, "baseline", "verify", "rollback verification"), (aa, "baseline", "candidate", "A/A promote"),
        (over, "candidate", "candidate-restart", "candidate restarted in place")]
    assert found[1].after.at == max(b.at for b in ledger.benches(aa) if b.role == "candidate")
    assert found[2].before.at == max(b.at for b in ledger.benches(over) if b.role == "candidate")
    assert ledger.restart_pairs(deployment="glm5", host="elsewhere", bench_key="k", exclude_releases=()) == []
    assert ledger.restart_pairs(deployment="glm5", host="h", bench_key="other", exclude_releases=()) == []


def test_three_starts_a_side_still_make_one_restart_pair_a_role_a_release(ledger, clock):
    """A one-level verdict decided over three starts a side (C1, C2, C3; B1, B2, B3): the candidate's pair is C1
    with its first restart (C2), the baseline's B1 with the latest verification (B3): never two pairs sharing a
    start, whose offset would then count twice as if independent."""
    rid = _begin(ledger)
    rows = {}
    for role, unit, key in (("baseline", "u", "k"), ("candidate", "v", "k"),
                            ("candidate-restart", "v", "candidate-restart:[8]"),
                            ("candidate-restart", "v", "candidate-restart:[8]:start 3"),
                            ("verify", "u", "verify:[8]"), ("verify", "u", "verify:[8]:start 3")):
        clock.now += 1
        rows.setdefault(role, []).append(ledger.save_bench(rid, role, NO_LEVELS, unit_hash=unit, bench_key=key, host="h"))
    found = ledger.restart_pairs(deployment="glm5", host="h", bench_key="k", exclude_releases=())
    assert [(p.before.id, p.after.id) for p in found] == [
        (rows["candidate"][0], rows["candidate-restart"][0]), (rows["baseline"][0], rows["verify"][1])]


def _watch(ledger, clock, live, start, reference, *, key="k", host="h"):
    """A synthetic canary watch of ``live`` on ``start`` against the row ``reference``, noted as the canary notes it."""
    clock.now += 1
    row = ledger.save_bench(live, "watch", NO_LEVELS, unit_hash="u", bench_key=key, host=host)
    ref = next(b for r in (live, reference[0]) for b in ledger.benches(r) if b.id == reference[1])
    ledger.record(live, "canary", "note", "watch", {"health": "ok", **WatchStart(start, row, ref.id, ref.at).to_dict()})
    return row


def test_restart_pairs_have_the_first_canary_watch_on_each_later_start_of_the_unit(ledger, clock):
    rolled, live = _begin(ledger), _begin(ledger)
    clock.now += 1
    ledger.save_bench(rolled, "baseline", NO_LEVELS, unit_hash="u", bench_key="k", host="h")
    promoted = (live, ledger.save_bench(live, "candidate", NO_LEVELS, unit_hash="u", bench_key="k", host="h"))
    first = ServerStart("invocation-1", clock.now - 0.5)  # the promotion was measured on this start
    _watch(ledger, clock, live, first, promoted)  # the same start: no pair
    second = ServerStart("invocation-2", clock.now + 0.5)
    after_restart = _watch(ledger, clock, live, second, promoted)
    _watch(ledger, clock, live, second, promoted)  # the same restart offset again: not another pair
    clock.now += 1
    ledger.save_bench(rolled, "verify", NO_LEVELS, unit_hash="u", bench_key="verify:[8]", host="h")
    other_sweep = (live, ledger.save_bench(live, "reference", NO_LEVELS, unit_hash="u", bench_key="other", host="h"))
    other_unit = (rolled, ledger.save_bench(rolled, "baseline", NO_LEVELS, unit_hash="v", bench_key="k", host="h"))
    third = ServerStart("invocation-3", clock.now + 0.5)
    _watch(ledger, clock, live, third, other_sweep)  # another sweep's reference: not comparable
    _watch(ledger, clock, live, third, other_unit)  # another unit's measurement: not a restart pair
    _watch(ledger, clock, live, ServerStart("invocation-4", clock.now + 0.5), promoted, host="elsewhere")

    found = ledger.restart_pairs(deployment="glm5", host="h", bench_key="k", exclude_releases=())
    assert [(p.before.id, p.after.id, p.source.one) for p in found] == [
        (promoted[1], after_restart, "canary watch after a restart"),
        (ledger.benches(rolled)[0].id, ledger.benches(rolled)[1].id, "rollback verification")]  # oldest first
    detail = [e.detail for e in ledger.events(live) if e.name == "watch"]
    assert [d["restart_between"] for d in detail] == [False, True, True, True, True, True]
    assert detail[1]["start"] == {"invocation_id": "invocation-2", "active_since": second.active_since}
    assert ledger.restart_pairs(deployment="glm5", host="h", bench_key="k", exclude_releases=(live,))[0].after.role \
        == "verify"  # the release being judged, or whose baseline it reuses, is left out
    assert ledger.restart_pairs(deployment="glm5", host="h", bench_key="k", exclude_releases=(), limit=1) == found[-1:]


@pytest.mark.parametrize(
    "env,interactive,expected",
    [
        ({"SUDO_USER": "alice", "USER": "root"}, True, "alice (sudo)"),
        ({"USER": "bob", "SSH_CONNECTION": "10.0.0.5 5555 10.0.0.1 22", "TERM": "xterm"}, True, "bob (ssh from 10.0.0.5)"),
        ({"USER": "root"}, False, "root (cron or another non-interactive job)"),
        ({"USER": "carol", "TERM": "xterm"}, True, "carol"),
    ],
)
def test_who(env, interactive, expected):
    assert who_from_env(env, interactive) == expected


def test_state_dir_resolution(tmp_path):
    assert resolve_state_dir(tmp_path, {}) == tmp_path
    assert str(resolve_state_dir(None, {"DEPLOYCTL_STATE_DIR": "/x"})) == "/x"
    assert str(resolve_state_dir(None, {})) == "/var/lib/deployctl"


def test_a_ledger_of_the_old_hash_rule_is_rehashed_and_its_rows_stay_valid(tmp_path):
    """Before the ledger had a version, it hashed the whole unit text; ``status`` and the stamp hashed it
    with the ``X-Deployctl-Hash=`` value blanked, so the same unit showed two hashes."""
    import hashlib

    from deployctl.units.stamp import unit_hash, with_hash

    text, stamped = with_hash("[Unit]\nX-Deployctl-Deployment=glm5\nX-Deployctl-Profile=baseline\n"
                              "X-Deployctl-Hash=\n[Service]\nExecStart=/bin/true\n")
    old = hashlib.sha256(text.encode()).hexdigest()
    with Ledger.open(tmp_path) as ledger:
        rid = ledger.begin_release(deployment="glm5", kind="adopted", unit_name="u.service", unit_text=text,
                                   unit_hash=old, who="root", finished=True, live=True)
        ledger.save_bench(rid, "baseline", NO_LEVELS, unit_hash=old, bench_key="k", host="h", sglang_version="v")
    db = sqlite3.connect(str(tmp_path / "ledger.sqlite3"))
    db.execute("PRAGMA user_version=0")  # as an older deployctl left it
    db.close()
    with Ledger.open(tmp_path) as ledger:
        assert ledger.get(rid).unit_hash == stamped == unit_hash(text) != old
        assert ledger.release_with_hash("glm5", stamped).id == rid
        assert ledger.fresh_baseline(unit_hash=stamped, bench_key="k", host="h", sglang_version="v",
                                     max_age_s=10**10) is not None
    with Ledger.open(tmp_path) as ledger:  # once only
        assert ledger.get(rid).unit_hash == stamped


def test_a_version_1_ledger_gains_the_fingerprint_and_its_old_baselines_load_but_are_not_reusable(tmp_path):
    from deployctl.judge.reuse import BaselineFingerprint

    db = sqlite3.connect(str(tmp_path / "ledger.sqlite3"))
    # Version 1's benchmarks table, as deployctl 0.1 created it: no fingerprint, no reused_from.
    db.executescript(SCHEMA.split("CREATE TABLE IF NOT EXISTS benchmarks")[0] + """
        CREATE TABLE benchmarks (id INTEGER PRIMARY KEY AUTOINCREMENT, release_id INTEGER NOT NULL,
          role TEXT NOT NULL, at REAL NOT NULL, unit_hash TEXT NOT NULL, host TEXT, sglang_version TEXT,
          bench_key TEXT NOT NULL, result_json TEXT NOT NULL);
        INSERT INTO releases (deployment, kind, unit_name, unit_text, unit_hash, who, started_at)
          VALUES ('glm5', 'adopted', 'u.service', 'x', 'h0', 'root', 1.0);
        INSERT INTO benchmarks (release_id, role, at, unit_hash, host, sglang_version, bench_key, result_json)
          VALUES (1, 'baseline', 2.0, 'h0', 'h', '0.5.9', 'k', '{}');
        PRAGMA user_version=1;""")
    db.close()
    with Ledger.open(tmp_path) as ledger:
        old = ledger.stored_baseline(unit_hash="h0", bench_key="k", host="h")
        assert old.release_id == 1 and old.fingerprint is None and old.reused_from is None  # loads, not reusable
        fp = BaselineFingerprint("h0", "k", "h", "0.5.9", "8× NVIDIA H200", "570.86", 700.0, "default")
        ledger.save_bench(1, "baseline", NO_LEVELS, unit_hash="h0", bench_key="k", host="h", fingerprint=fp)
        ledger.save_bench(1, "baseline", NO_LEVELS, unit_hash="h0", bench_key="k", host="h", fingerprint=fp,
                          reused_from=1)  # a reused row is never itself the stored baseline
        found = ledger.stored_baseline(unit_hash="h0", bench_key="k", host="h")
        assert found.fingerprint == fp and found.reused_from is None and found.at > 2.0
    db = sqlite3.connect(str(tmp_path / "ledger.sqlite3"))  # migrated once; the version says so
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == LEDGER_VERSION == 2
    finally:
        db.close()


def test_a_ledger_in_memory_touches_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = tmp_path.stat().st_mode
    with Ledger.in_memory() as ledger:
        rid = ledger.begin_release(deployment="d", kind="adopted", unit_name="u", unit_text="x", unit_hash="h", who="w")
        assert ledger.get(rid).unit_hash == "h"
    assert list(tmp_path.iterdir()) == [] and tmp_path.stat().st_mode == before
