"""The generated data sets of the tiny model (data_source `synthetic`) in the formats of the
paper's sets (run/llm/catalog.py), made deterministically from SYNTHETIC_SEED and written once as
JSON Lines under data/llm/synthetic/, so a fresh clone makes the same files.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from run.llm.assets import data_root, locked
from run.llm.catalog import SYNTHETIC_ROWS, SYNTHETIC_SEED
from run.llm.data.readers import write_jsonl

NAMES = "Anna Ben Carla David Emma Felix Greta Hugo Iris Jonas Kira Leo Mia Noah Olga Paul".split()
NOUNS = (
    "cat dog bird teacher farmer doctor student baker river garden window train city "
    "bridge forest letter market child painter engine"
).split()
# each adjective with its opposite, in the order the generators draw them from
OPPOSITE = dict(
    pair.split(":")
    for pair in (
        "small:large quiet:loud bright:dark old:new young:old happy:sad green:red busy:idle "
        "cold:hot warm:cool tall:short slow:fast clever:foolish"
    ).split()
)
ADJS = list(OPPOSITE)
VERBS = "walk play work wait look cook paint clean visit call".split()
PLACES = "park station library kitchen office garden harbour museum school cafe".split()
TIMES = ["on Monday", "on Friday", "tomorrow", "tonight", "next week", "at noon", "after lunch"]
ITEMS = "tea bread apples tickets paint books flowers cake".split()


def _sentence(r: random.Random) -> tuple[str, str, str]:
    """A simple present-tense sentence with its noun and verb (used by several generators)."""
    noun, verb, adj, place = r.choice(NOUNS), r.choice(VERBS), r.choice(ADJS), r.choice(PLACES)
    return f"The {adj} {noun} {verb}s in the {place} {r.choice(TIMES)}.", noun, verb


def alpaca_row(r: random.Random) -> dict[str, str]:
    kind = r.randrange(6)
    if kind == 0:
        adj = r.choice(ADJS)
        return {
            "instruction": f"Give the opposite of the word '{adj}'.",
            "input": "",
            "output": f"The opposite of '{adj}' is '{OPPOSITE[adj]}'.",
        }
    if kind == 1:
        nums = [r.randrange(100) for _ in range(r.randrange(4, 9))]
        return {
            "instruction": "Sort the following numbers in ascending order.",
            "input": ", ".join(map(str, nums)),
            "output": ", ".join(map(str, sorted(nums))),
        }
    if kind == 2:
        sent, _, verb = _sentence(r)
        past = sent.replace(f"{verb}s ", f"{verb}ed ")
        return {
            "instruction": "Rewrite the sentence in the past tense.",
            "input": sent,
            "output": past,
        }
    if kind == 3:
        noun = r.choice(NOUNS)
        a, b, c = r.sample(ADJS, 3)
        place = r.choice(PLACES)
        return {
            "instruction": f"Write a short description of a {noun}.",
            "input": "",
            "output": (
                f"A {noun} is often {a} and {b}. Many people see a {noun} near the {place}, "
                f"where it looks {c}. Most of the time a {noun} is easy to recognise."
            ),
        }
    if kind == 4:
        sent, _, _ = _sentence(r)
        return {
            "instruction": "Count the words in the sentence.",
            "input": sent,
            "output": f"The sentence has {len(sent.split())} words.",
        }
    words = [r.choice(NOUNS) for _ in range(r.randrange(3, 6))]
    return {
        "instruction": "Convert the words to upper case.",
        "input": " ".join(words),
        "output": " ".join(w.upper() for w in words),
    }


def grammar_row(r: random.Random) -> dict[str, str]:
    name, verb, place = r.choice(NAMES), r.choice(VERBS), r.choice(PLACES)
    correct = f"{name} {verb}s to the {place} {r.choice(TIMES)}."
    broken = correct
    for _ in range(r.randrange(1, 3)):
        kind = r.randrange(4)
        if kind == 0:
            broken = broken.replace(f"{verb}s ", f"{verb} ", 1)
        elif kind == 1:
            broken = broken.replace(" the ", " ", 1)
        elif kind == 2:
            broken = broken.replace(" a ", " an ", 1)
        else:
            broken = broken[0].lower() + broken[1:]
    if broken == correct:
        broken = correct.replace(" to ", " too ", 1)
    return {"input": broken, "output": correct}


def samsum_row(r: random.Random, i: int) -> dict[str, str]:
    a, b = r.sample(NAMES, 2)
    place, time, item = r.choice(PLACES), r.choice(TIMES), r.choice(ITEMS)
    turns = [
        f"{a}: Hi {b}, are you coming to the {place} {time}?",
        f"{b}: I think so. Should I bring {item}?",
        f"{a}: Yes please, we have no {item} left.",
    ]
    topic = r.choice(NOUNS)
    for _ in range(r.randrange(1, 5)):
        who = r.choice((a, b))
        turns.append(f"{who}: The {topic} will be {r.choice(ADJS)}, I guess.")
    turns.append(f"{b}: Fine, see you {time} then.")
    return {
        "id": f"syn{i:05d}",
        "dialogue": "\r\n".join(turns),
        "summary": (
            f"{b} will come to the {place} {time} and bring {item} for {a}. "
            f"They also talk about the {topic}."
        ),
    }


def slimorca_row(r: random.Random) -> dict[str, Any]:
    noun, place, adj = r.choice(NOUNS), r.choice(PLACES), r.choice(ADJS)
    sent, _, _ = _sentence(r)
    question = f"Read the sentence and answer. {sent} Where is the {noun} usually seen?"
    answer = (
        f"Step 1: find the place in the sentence. Step 2: the sentence names the {place}. "
        f"So the {noun} is usually seen in the {place}, and it is described as {adj}."
    )
    return {
        "conversations": [
            {"from": "system", "value": "You are a helpful assistant. Think step by step."},
            {"from": "human", "value": question},
            {"from": "gpt", "value": answer},
        ]
    }


GENERATORS: dict[str, Callable[[random.Random, int], dict[str, Any]]] = {
    "alpaca": lambda r, i: alpaca_row(r),
    "grammar": lambda r, i: grammar_row(r),
    "samsum": samsum_row,
    "slimorca": lambda r, i: slimorca_row(r),
}


def synthetic_parent(name: str) -> Path:
    """The JSON Lines file of a generated parent set, written once (under the data lock)."""
    path = data_root() / "synthetic" / f"{name}.jsonl"
    if not path.is_file():
        with locked():
            if not path.is_file():
                r = random.Random(f"{SYNTHETIC_SEED}-{name}")
                write_jsonl(path, [GENERATORS[name](r, i) for i in range(SYNTHETIC_ROWS[name])])
    return path
