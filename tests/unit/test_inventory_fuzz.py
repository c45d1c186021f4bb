"""Hostile inventories: mutated copies of the shipped ones through `validate` and `render`, in-process.

Every mutation must end in exit 0 (still a valid inventory) or exit 2 (a located problem), never exit 1
(a crash: KeyError, RecursionError, UnicodeEncodeError …), and quickly. The seed is fixed, so a failure
reproduces; the mutation that failed is in the assertion message. Plus the named hostile cases of
issue 22: alias bombs, self-referencing aliases, missing presets, lone surrogates, bytes that are not UTF-8.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest
from testpaths import REPO as ROOT

from deployctl.cli import main

SEED = 22
MUTATIONS = 320
SOURCES = [ROOT / "inventory" / "demo.yaml", ROOT / "inventory" / "example.yaml"]

# Values an operator (or an attacker with write access to the inventory) might type where a scalar goes.
HOSTILE = [
    '"\\ud800"', '"a\\udfff"', '"\\x00"', '"\\n[Service]\\nExecStartPre=/bin/sh"', "'%n %h $HOME ${X}'", ";",
    "~", "null", "{}", "[]", "[[[]]]", "&x [*x]", "*undefined", "!!python/object:os.system", "!!binary aGk=",
    "1e999", "-1", "0x1F", "010", "1.10", "yes", "on", ".inf", ".nan", "2026-12-01", '"' + "x" * 5000 + '"',
    "'", '"', "- a", "a: b", "<<: *x", "\u2028", "é", "\U0001F600", "|\n  text", ">-", "?", "@", "`",
]


def _mutate(rng: random.Random, text: str) -> bytes:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        op = rng.randrange(9)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(rng.randrange(len(lines)), lines[i])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:  # replace a value
            lines[i] = re.sub(r":\s.*", lambda _: ": " + rng.choice(HOSTILE), lines[i], count=1) or lines[i]
        elif op == 4:  # replace a key
            lines[i] = re.sub(r"^(\s*)[^:#]+:", lambda m: m[1] + rng.choice(HOSTILE) + ":", lines[i], count=1)
        elif op == 5:  # indentation
            lines[i] = " " * rng.choice((0, 1, 2, 3, 6)) + lines[i].lstrip(" ")
        elif op == 6:  # an anchor here, an alias elsewhere
            lines[i] = re.sub(r":(\s)", r": &a\1", lines[i], count=1)
            j = rng.randrange(len(lines))
            lines[j] = re.sub(r":\s.*", ": *a", lines[j], count=1)
        elif op == 7:
            lines = lines[: rng.randrange(1, len(lines) + 1)]
        else:
            cut = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:cut] + rng.choice(HOSTILE) + lines[i][cut:]
    data = "".join(lines).encode("utf-8", errors="surrogatepass")
    if rng.random() < 0.05:  # a byte that is not UTF-8
        at = rng.randrange(len(data) + 1)
        data = data[:at] + bytes([rng.choice((0x80, 0xC3, 0xFF, 0xFE))]) + data[at:]
    return data


def _deployments(text: str) -> list[str]:
    section = text.split("\ndeployments:\n", 1)[1]
    return re.findall(r"^  ([A-Za-z0-9][\w.-]*):\s*$", section, flags=re.MULTILINE)


def test_mutated_inventories_exit_0_or_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    sources = [(p.read_text(encoding="utf-8"), _deployments(p.read_text(encoding="utf-8"))) for p in SOURCES]
    path = tmp_path / "inventory.yaml"
    crashes = []
    codes: dict[int, int] = {}
    started = time.monotonic()
    for n in range(MUTATIONS):
        text, deployments = sources[n % len(sources)]
        data = _mutate(rng, text)
        path.write_bytes(data)
        for argv in (["validate", "-i", str(path)],
                     ["render", rng.choice(deployments), "--profile", "baseline", "-i", str(path)]):
            code = main(argv)
            codes[code] = codes.get(code, 0) + 1
            err = capsys.readouterr().err
            if code not in (0, 2):
                crashes.append(f"mutation {n} ({argv[0]}) exit {code}:\n{data[:2000]!r}\n{err[-2000:]}")
            elif code == 2 and "error:" in err and "problem" in err:
                located = [line for line in err.splitlines() if line.startswith(f"{path}:")]
                assert located, f"mutation {n}: a problem without FILE:LINE:\n{err}"
    assert not crashes, f"{len(crashes)} crashes; first:\n{crashes[0]}"
    assert codes.get(2, 0) > MUTATIONS // 4 and codes.get(0, 0) > 0, codes  # the mutations did reach both ends
    assert time.monotonic() - started < 120  # a generous bound: it takes seconds, a bomb would take minutes


def _laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"[: levels - 1]):
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("name", "data", "where"), [
    ("billion-laughs", _laughs().encode(), ":5: e: expands to more than"),
    ("self-alias", b"hosts: &a\n  x: *a\n", ":2: hosts.x: an alias refers to a node that contains it"),
    ("self-merge", b"hosts: &a\n  x:\n    <<: *a\n", ":2: hosts.x: "),
    ("deep-brackets", b"hosts: " + b"[" * 20000 + b"\n", ":1: (file): nested more than"),
    ("deep-aliases", ("".join(f"x{i}: &x{i} [*x{i - 1}]\n" if i else "x0: &x0 [1]\n" for i in range(200))).encode(),
     ": nested more than"),
    ("missing-models", (ROOT / "inventory" / "demo.yaml").read_bytes().split(b"\nmodels:\n")[0]
     + b"\ndeployments:\n  d:\n    host: sim-sm120-x8\n    unit: sglang-d.service\n    port: 30001\n"
       b"    model: nope\n    profiles:\n      baseline: {}\n", ": deployments.d.model: unknown model preset 'nope'"),
    ("lone-surrogate", (ROOT / "inventory" / "demo.yaml").read_bytes().replace(
        b"reasoning-parser: glm45", b'reasoning-parser: "glm\\ud800"', 1),
     ":35: models.glm5-nvfp4.flags.reasoning-parser: contains a lone surrogate U+D800"),
    ("not-utf8", (ROOT / "inventory" / "demo.yaml").read_bytes().replace(b"glm45", b"glm\xff45", 1),
     ":35: models.glm5-nvfp4.flags.reasoning-parser: byte 0xff at column 28 is not UTF-8"),
])
def test_hostile_inventory_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                      data: bytes, where: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    for argv in (["validate", "-i", str(path)], ["render", "glm5-sim", "-i", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert any(line.startswith(str(path)) and where in line for line in err.splitlines()), err
