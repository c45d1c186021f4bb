"""Secrets: whole-name rules, values with spaces and quotes, every place the ledger stores text."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace

import pytest
from support.promote import bench

from deployctl.adapters.ledger import Ledger
from deployctl.facts.secrets import REDACTED, SGLANG_SECRET_FIELDS, is_secret_name, redact, redact_text
from deployctl.startup.parser import StartupReport

SENTINEL = "s3ntinel-Secret-42"


@pytest.mark.parametrize("name", [
    "api_key", "--api-key", "admin-api-key", "ssl_keyfile_password", "watermark_key",
    "HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "apiKey", "my.secret", "AWS_SECRET_ACCESS_KEY",
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    # SGLang fields that hold a word of the rules but no secret: redacting them blocks `rollback --to`.
    "--speculative-num-draft-tokens", "speculative_token_map", "max_total_tokens", "ds_heavy_token_num",
    "bucket_time_to_first_token", "ssl_keyfile", "skip_tokenizer_init", "tokenizer_path",
    # whole words, not substrings
    "MONKEY", "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "NCCL_P2P_LEVEL",
])
def test_not_secret_names(name):
    assert not is_secret_name(name)


def test_explicit_sglang_fields_exist_in_the_shipped_fields():
    from importlib import resources
    data = json.loads(resources.files("deployctl.facts").joinpath("sglang-serverargs-fields.json").read_text())
    names = {n for version in data.values() for n, _ in version["fields"]}
    assert SGLANG_SECRET_FIELDS <= names


@pytest.mark.parametrize("text", [
    f'ExecStart=/usr/bin/python -m sglang.launch_server --api-key "{SENTINEL} with space" --port 8000',
    f"--api-key='{SENTINEL} \\' quoted' --tp 8",
    f'--api-key=ab"{SENTINEL} x"yz --tp 8',
    f'Environment="HF_TOKEN={SENTINEL} a b" "NCCL_P2P_LEVEL=5"',
    f"Environment=OPENAI_API_KEY={SENTINEL},x",
    f"server_args=ServerArgs(model_path='m', api_key='{SENTINEL} 1', port=30000)",
    f"server_args={{'model_path': 'm', 'admin_api_key': '{SENTINEL}', 'tp_size': 1}}",
    f'{{"api_key": "{SENTINEL} 9", "x": 1}}',
    f"command: ['python', '--api-key', '{SENTINEL}', '--tp', '2']",
])
def test_values_are_taken_out_whole(text):
    out = redact_text(text)
    assert REDACTED in out
    assert "Secret" not in out and "quoted" not in out and " with space" not in out


def test_ordinary_text_is_kept():
    text = ("ExecStart=/x --speculative-num-draft-tokens 4 --max-total-tokens 9 --tokenizer-path /t\n"
            "server_args=ServerArgs(api_key=None, speculative_token_map='/m', port=1)\n")
    assert redact_text(text) == text
    assert "NCCL_P2P_LEVEL=5" in redact_text('Environment="HF_TOKEN=x" "NCCL_P2P_LEVEL=5"')


def test_redact_walks_json():
    report = {"server_args": {"api_key": SENTINEL, "tp_size": 2, "admin_api_key": None},
              "failure": {"lines": [f"--api-key {SENTINEL}"]}}
    out = redact(report)
    assert SENTINEL not in json.dumps(out)
    assert out["server_args"] == {"api_key": REDACTED, "tp_size": 2, "admin_api_key": None}


def test_ledger_stores_no_secret_and_is_private(tmp_path):
    state = tmp_path / "state"
    unit = f"[Service]\nExecStart=/x --api-key {SENTINEL} --speculative-num-draft-tokens 4\n"
    with Ledger.open(state) as led:
        rid = led.begin_release(deployment="d", kind="promote", unit_name="u.service", unit_text=unit,
                                unit_hash="h", who="w", flags={"api-key": SENTINEL, "speculative-num-draft-tokens": 4})
        led.save_startup(rid, "candidate", StartupReport("ready", server_args={"api_key": SENTINEL},
                                                         notices=(f"server_args=ServerArgs(api_key='{SENTINEL}')",)))
        led.save_state(rid, {"phase": "BENCH", "reasons": [f"--api-key={SENTINEL}"]})
        led.record(rid, "BENCH", "note", "n", {"line": f"HF_TOKEN={SENTINEL}"})
        led.save_bench(rid, "candidate", replace(bench({1: 1.0}), model=f"'api_key': '{SENTINEL}'"), unit_hash="h",
                       bench_key="k")
        led.finish(rid, result="KEPT", verdict="PASS", reasons=[f"--admin-api-key {SENTINEL}"])
        release = led.get(rid)
        assert release.flags["speculative-num-draft-tokens"] == 4
        assert "--speculative-num-draft-tokens 4" in release.unit_text
        files = sorted(state.iterdir())
        assert {f.name for f in files} >= {"ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm"}
        for f in files:
            assert SENTINEL.encode() not in f.read_bytes()
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_an_older_world_readable_ledger_is_tightened(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    Ledger.open(tmp_path).close()
    os.chmod(path, 0o644)
    Ledger.open(tmp_path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_looser_state_directory_of_ours_is_tightened_a_shared_one_is_not(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)  # as a lock or an older deployctl left it
    Ledger.open(state).close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    Ledger.open(shared).close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_flag_described_by_a_mapping_loses_its_values():
    diff = {"flag": "api_key", "before": SENTINEL, "after": "other", "effective": True, "gate": None}
    assert redact([diff]) == [{"flag": "api_key", "before": REDACTED, "after": REDACTED, "effective": True,
                               "gate": None}]
    assert redact({"flag": "tp_size", "before": 1, "after": 2}) == {"flag": "tp_size", "before": 1, "after": 2}
    assert SENTINEL not in redact_text(f"api_key: {SENTINEL}\n")


def test_a_tuning_flag_that_looks_like_a_secret_keeps_the_unit_unredacted(tmp_path):
    # Substring rules redacted this unit, and a redacted unit cannot be put back by `rollback --to`.
    unit = ("[Service]\nEnvironment=\"TOKENIZERS_PARALLELISM=false\"\n"
            "ExecStart=/x --speculative-num-draft-tokens 4 --speculative-token-map /m --max-total-tokens 9\n")
    with Ledger.open(tmp_path) as led:
        rid = led.begin_release(deployment="d", kind="promote", unit_name="u.service", unit_text=unit,
                                unit_hash="h", who="w", flags={"speculative-num-draft-tokens": 4})
        release = led.get(rid)
    assert not release.redacted and release.unit_text == unit
    assert release.flags == {"speculative-num-draft-tokens": 4}
