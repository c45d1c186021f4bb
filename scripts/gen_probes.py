#!/usr/bin/env python3
"""Writes deployctl/outputgate/probes-v1.json, the output gate's fixed probe set, deterministically.

Every prompt is written here (templates and word lists of this file), so the data is this project's own
under its licence. The file is what ships; a new set is a new version (probes-v2.json), never an edit of
v1: stored baseline outputs are compared only with results of the same version.

    python scripts/gen_probes.py          # rewrites the file; tests check it is current
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VERSION = "v1"
OUT = Path(__file__).resolve().parents[1] / "deployctl" / "outputgate" / f"probes-{VERSION}.json"

NAMES = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Milo", "Nia"]
THINGS = ["apples", "pencils", "marbles", "stickers", "books", "coins", "cookies", "shells", "cards", "stamps"]

# Exact-answer facts: one word or number, stable for decades.
FACTS = [
    ("How many days are in a week?", "7"), ("How many legs does a spider have?", "8"),
    ("How many minutes are in an hour?", "60"), ("How many sides does a hexagon have?", "6"),
    ("What is the chemical symbol for gold?", "Au"), ("What is the chemical symbol for sodium?", "Na"),
    ("What is the capital of France?", "Paris"), ("What is the capital of Japan?", "Tokyo"),
    ("What is the capital of Italy?", "Rome"), ("What is the capital of Egypt?", "Cairo"),
    ("What is the capital of Canada?", "Ottawa"), ("What is the capital of Kenya?", "Nairobi"),
    ("What is the largest planet in the solar system?", "Jupiter"),
    ("Which planet is closest to the sun?", "Mercury"), ("How many months are in a year?", "12"),
    ("How many hours are in a day?", "24"), ("What is the freezing point of water in degrees Celsius?", "0"),
    ("What is the boiling point of water in degrees Celsius at sea level?", "100"),
    ("How many continents are there?", "7"), ("What gas do plants take in from the air?", "CO2"),
    ("What is the square root of 81?", "9"), ("How many seconds are in a minute?", "60"),
    ("What colour do you get by mixing blue and yellow?", "green"), ("How many strings does a violin have?", "4"),
    ("What is the first letter of the Greek alphabet?", "alpha"), ("How many players are on a football (soccer) team on the field?", "11"),
    ("What is the smallest prime number?", "2"), ("How many degrees are in a right angle?", "90"),
    ("What is the opposite of north?", "south"), ("How many wheels does a tricycle have?", "3"),
]

OPENINGS = [
    "The old lighthouse stood at the edge of the bay, and every evening", "In the spring the river rose over its banks until",
    "The recipe called for flour, butter and a pinch of salt, but", "When the train finally left the station, the passengers",
    "The committee met on a Tuesday to discuss the new library, which", "Scientists measured the temperature of the lake each morning because",
    "A small shop on the corner sold maps of places that", "The first rule of the workshop was simple:",
    "After the storm passed, the village gathered in the square and", "The garden had been planted in careful rows so that",
    "On the third day of the expedition the team reached a ridge where", "The museum's newest exhibit explains how early clocks",
    "Every winter the birds returned to the marsh, and the farmers", "The engineer checked the bridge twice before she",
    "The letter arrived without a stamp, which meant that", "In a quiet town by the mountains, the baker",
]
CLOSINGS = ["", " Nobody expected what came next.", " It was the last week of summer.", " The lights were still on."]

CHAT_TASKS = [
    "Explain in one sentence why the sky looks blue.", "Give me three tips for keeping a houseplant alive.",
    "Summarise the water cycle for a ten-year-old.", "Write a two-line poem about a cat on a windowsill.",
    "What should I pack for a one-day hike?", "Describe a bicycle to someone who has never seen one.",
    "Suggest a name for a bakery that sells only bread.", "How do I politely decline a meeting invitation?",
    "List the steps to boil an egg.", "Why do we have leap years?",
]


def chat(user: str) -> str:
    """ChatML, the template of the Qwen and GLM families this project serves."""
    return f"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def probes() -> list[dict[str, object]]:
    rng = random.Random(20261202)
    out: list[dict[str, object]] = []

    def add(kind: str, prompt: str, answer: str | None) -> None:
        out.append({"id": f"{kind}-{sum(1 for p in out if p['kind'] == kind) + 1:03d}", "kind": kind,
                    "prompt": prompt, "answer": answer})

    for _ in range(120):
        op = rng.choice("+-*")
        a, b = (rng.randint(2, 99), rng.randint(2, 99)) if op != "*" else (rng.randint(2, 19), rng.randint(2, 19))
        if op == "-" and b > a:
            a, b = b, a
        value = a + b if op == "+" else a - b if op == "-" else a * b
        word = {"+": "plus", "-": "minus", "*": "times"}[op]
        add("math", f"Question: What is {a} {word} {b}?\nAnswer:", str(value))
    for _ in range(60):
        name, thing = rng.choice(NAMES), rng.choice(THINGS)
        have, buy, give = rng.randint(5, 40), rng.randint(2, 30), rng.randint(1, 5)
        add("math", f"Question: {name} has {have} {thing}. {name} buys {buy} more and then gives away {give}. "
                    f"How many {thing} does {name} have now?\nAnswer:", str(have + buy - give))
    for question, answer in FACTS:
        add("fact", f"Question: {question}\nAnswer:", answer)
    for opening in OPENINGS:
        for closing in rng.sample(CLOSINGS, 4):
            add("text", (closing.strip() + " " + opening).strip(), None)
    for task in CHAT_TASKS:
        add("chat", chat(task), None)
    for _ in range(20):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        add("chat", chat(f"What is {a} plus {b}? Reply with the number only."), str(a + b))
    return out


def render() -> str:
    data = {"version": VERSION, "licence": "MIT, as deployctl (written by scripts/gen_probes.py)",
            "probes": probes()}
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT} ({len(probes())} probes)", file=sys.stderr)
