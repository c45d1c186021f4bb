"""``deployctl judge`` replays a verdict from stored JSON."""

from __future__ import annotations

import argparse
import json

import pytest
from support.sweeps import BASE, sweep

from deployctl.commands import judge as verb
from deployctl.console.options import add_global_options
from deployctl.errors import InputError


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    verb.add_arguments(parser)
    add_global_options(parser, in_verb=False)
    return verb.run(parser.parse_args(list(argv)))


@pytest.fixture
def files(tmp_path):
    def write(name: str, data) -> str:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return str(path)
    return write


def test_a_failing_candidate_exits_10_with_the_reasons(files, capsys):
    b = files("b.json", sweep({64: BASE}).to_dict())
    c = files("c.json", sweep({64: [876.0, 878.0]}).to_dict())
    assert run(b, c) == 10
    out = capsys.readouterr().out
    assert out.startswith("FAIL: C=64 regressed beyond the limit\n  C=64: −12.")


def test_json_output_and_policy_file(files, capsys):
    b = files("b.json", sweep({64: BASE}).to_dict())
    c = files("c.json", sweep({64: [876.0, 878.0]}).to_dict())
    p = files("p.yaml", "policy:\n  judge:\n    limit_pct: 15\n")
    assert run(b, c, "--policy", p, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outcome"] == "PASS" and data["levels"][0]["checks"][0]["limit_pct"] == 15


def test_inconclusive_exits_11(files):
    b = files("b.json", sweep({64: BASE}).to_dict())
    c = files("c.json", sweep({64: [900.0, 1000.0]}).to_dict())
    assert run(b, c) == 11


def test_bad_inputs_are_input_errors_naming_the_file(files):
    b = files("b.json", sweep({64: BASE}).to_dict())
    with pytest.raises(InputError, match="not JSON"):
        run(b, files("c.json", "{nope"))
    with pytest.raises(InputError, match="no 'levels'"):
        run(b, files("c.json", {"x": 1}))
    with pytest.raises(InputError, match="cannot read"):
        run(b, "/nonexistent/c.json")
    with pytest.raises(InputError, match=r"p.yaml:1: limit_pct: "):
        run(b, b, "--policy", files("p.yaml", "limit_pct: -1\n"))
    with pytest.raises(InputError, match=r"p.json:1: bogus: unknown key"):
        run(b, b, "--policy", files("p.json", '{"bogus": 1}'))


def test_a_policy_typo_is_located_with_a_did_you_mean(files):
    b = files("b.json", sweep({64: BASE}).to_dict())
    with pytest.raises(InputError) as err:
        run(b, b, "--policy", files("p.yaml", "policy:\n  judge:\n    min_trails: 3\n"))
    assert "p.yaml:3: policy.judge.min_trails: unknown key; did you mean 'min_trials'?" in err.value.message
