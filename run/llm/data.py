"""Data sets for the LLM runs: where they come from, the template subsets and the DPO pairs.

Two sources, chosen by the model:
- `synthetic` (model tiny): four small data sets generated here, deterministically, in the formats
  of the paper's sets: alpaca (instruction/input/output), grammar (input/output: a sentence with
  injected errors and its correction, like C4-200M GEC), samsum (dialogue/summary) and slimorca
  (ShareGPT `conversations`). Written once as JSON Lines under data/llm/synthetic/.
- `hf` (model llama3_8b): the paper's sets, read with Hugging Face `datasets` in offline mode from
  the local cache (yahma/alpaca-cleaned, liweili/c4_200m, Samsung/samsum, Open-Orca/SlimOrca-Dedup),
  or from LLM_DATASETS_DIR/<name>.jsonl (or .json) when that folder is set. Never downloaded.

Template subsets (the journal's three 500-row sets): instruct <- alpaca, summary <- samsum,
error-correction <- grammar. The rows are `sorted(random.Random(0).sample(range(len(parent)), k))`,
so the same parent always gives the same subset, in parent order. k is the profile's
`template_rows` (500 in the paper, fewer in smoke).

DPO preference pairs (the paper does not say how it made them; this is our documented assumption):
for row i of a set, the prompt is the row's prompt exactly as the SFT recipe would present it,
`chosen` is the row's own reference response and `rejected` is the reference response of row
i+1 (the last row takes row 0's). The rejected answer is fluent text of the same kind and length
distribution that does not answer the prompt, so DPO compute matches SFT-like sequence lengths.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from run.llm.assets import AssetError, data_root, locked
from run.store import write_text_atomic

SUBSET_SEED = 0
SYNTHETIC_ROWS = {"alpaca": 1200, "grammar": 1200, "samsum": 800, "slimorca": 800}
SYNTHETIC_SEED = 2025


@dataclass(frozen=True)
class DataSet:
    name: str
    hf_id: str  # the paper's Hugging Face data set
    builder: str  # torchtune builder of the SFT data set
    columns: tuple[str, ...]  # columns every row must have
    prompt_template: str | None  # torchtune prompt template the tokenizer applies
    template: str  # the paper's name of the template (Table 4)


DATASETS: dict[str, DataSet] = {
    "alpaca": DataSet(
        "alpaca",
        "yahma/alpaca-cleaned",
        "torchtune.datasets.alpaca_dataset",
        ("instruction", "input", "output"),
        None,
        "Instruct",
    ),
    "grammar": DataSet(
        "grammar",
        "liweili/c4_200m",
        "torchtune.datasets.grammar_dataset",
        ("input", "output"),
        "torchtune.data.GrammarErrorCorrectionTemplate",
        "Grammar Error Correction",
    ),
    "samsum": DataSet(
        "samsum",
        "Samsung/samsum",
        "torchtune.datasets.samsum_dataset",
        ("dialogue", "summary"),
        "torchtune.data.SummarizeTemplate",
        "Summarize",
    ),
    "slimorca": DataSet(
        "slimorca",
        "Open-Orca/SlimOrca-Dedup",
        "torchtune.datasets.slimorca_dataset",
        ("conversations",),
        None,
        "Instruct",
    ),
}
# The journal's template subsets and their parent sets.
TEMPLATES = {"instruct": "alpaca", "summary": "samsum", "error-correction": "grammar"}
TEMPLATE_LABELS = {
    "instruct": "Instruct",
    "summary": "Summary",
    "error-correction": "Error Correction",
}


def parent_of(dataset: str) -> DataSet:
    return DATASETS[TEMPLATES.get(dataset, dataset)]


def source_for(model: str) -> str:
    return "synthetic" if model == "tiny" else "hf"


# ---------------------------------------------------------------- synthetic generators
NAMES = "Anna Ben Carla David Emma Felix Greta Hugo Iris Jonas Kira Leo Mia Noah Olga Paul".split()
NOUNS = (
    "cat dog bird teacher farmer doctor student baker river garden window train city "
    "bridge forest letter market child painter engine"
).split()
ADJS = "small quiet bright old young happy green busy cold warm tall slow clever".split()
OPPOSITE = {
    "small": "large",
    "quiet": "loud",
    "bright": "dark",
    "old": "new",
    "young": "old",
    "happy": "sad",
    "busy": "idle",
    "cold": "hot",
    "warm": "cool",
    "tall": "short",
    "slow": "fast",
    "clever": "foolish",
    "green": "red",
}
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


def synthetic_rows(name: str, n: int, seed: int = SYNTHETIC_SEED) -> list[dict[str, Any]]:
    r = random.Random(f"{seed}-{name}")
    return [GENERATORS[name](r, i) for i in range(n)]


# ---------------------------------------------------------------- files
def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))


def read_jsonl(path: Path, columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Rows of a JSON Lines (or JSON array) file, or AssetError naming the first bad line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise AssetError(f"cannot read data file {path}: {exc.strerror}") from exc
    rows: list[Any]
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AssetError(f"malformed data file {path}: {exc.msg} at line {exc.lineno}") from exc
        numbered = list(enumerate(rows, 1))
    else:
        numbered = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                numbered.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise AssetError(f"malformed data file {path} line {lineno}: {exc.msg}") from exc
    if not numbered:
        raise AssetError(f"data file {path} holds no rows")
    for lineno, row in numbered:
        if not isinstance(row, dict):
            raise AssetError(f"malformed data file {path} line {lineno}: not a JSON object")
        missing = [c for c in columns if c not in row]
        if missing:
            raise AssetError(
                f"malformed data file {path} line {lineno}: missing column(s) {', '.join(missing)}"
            )
    return [row for _, row in numbered]


def synthetic_parent(name: str) -> Path:
    path = data_root() / "synthetic" / f"{name}.jsonl"
    if not path.is_file():
        with locked():
            if not path.is_file():
                write_jsonl(path, synthetic_rows(name, SYNTHETIC_ROWS[name]))
    return path


def local_file(name: str) -> Path | None:
    folder = os.environ.get("LLM_DATASETS_DIR")
    if not folder:
        return None
    for suffix in (".jsonl", ".json"):
        path = Path(folder).expanduser() / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def hf_parent_rows(ds: DataSet) -> list[dict[str, Any]]:
    """All rows of a real parent set, from LLM_DATASETS_DIR or the offline HF cache."""
    local = local_file(ds.name)
    if local is not None:
        return read_jsonl(local, ds.columns)
    data = load_hf(ds)
    return [dict(row) for row in data]


def load_hf(ds: DataSet) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    try:
        return load_dataset(ds.hf_id, split="train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many types for "not cached"
        raise AssetError(
            f"data set '{ds.name}' ({ds.hf_id}) is not in the local Hugging Face cache and "
            f"LLM_DATASETS_DIR has no {ds.name}.jsonl: fetch it on a machine with network "
            f"(`datasets.load_dataset('{ds.hf_id}')`) or put the file there "
            f"({type(exc).__name__})"
        ) from exc


def check_hf_available(ds: DataSet) -> None:
    if local_file(ds.name) is not None:
        read_jsonl(local_file(ds.name), ds.columns)  # type: ignore[arg-type]
        return
    load_hf(ds)


# ---------------------------------------------------------------- template subsets
def subset_indices(n_parent: int, rows: int, seed: int = SUBSET_SEED) -> list[int]:
    if rows > n_parent:
        raise AssetError(
            f"a {rows}-row subset needs a parent with at least {rows} rows ({n_parent})"
        )
    return sorted(random.Random(seed).sample(range(n_parent), rows))


def parent_rows(name: str, source: str) -> list[dict[str, Any]]:
    ds = DATASETS[name]
    if source == "synthetic":
        return read_jsonl(synthetic_parent(name), ds.columns)
    return hf_parent_rows(ds)


def template_subset(template: str, rows: int, source: str) -> Path:
    """The k-row subset of a template's parent, written once as JSON Lines."""
    parent = TEMPLATES[template]
    path = data_root() / source / "templates" / f"{template}-r{rows}.jsonl"
    if path.is_file():
        return path
    all_rows = parent_rows(parent, source)
    chosen = [all_rows[i] for i in subset_indices(len(all_rows), rows)]
    with locked():
        if not path.is_file():
            write_jsonl(path, chosen)
    return path


# ---------------------------------------------------------------- preference pairs
def sft_messages(name: str, row: dict[str, Any]) -> list[dict[str, str]]:
    """The row as the SFT recipe's message transform sees it: [..prompt.., assistant]."""
    from torchtune.data import AlpacaToMessages, InputOutputToMessages, ShareGPTToMessages

    if name == "alpaca":
        msgs = AlpacaToMessages(train_on_input=False)(row)["messages"]
    elif name == "grammar":
        msgs = InputOutputToMessages()(row)["messages"]
    elif name == "samsum":
        msgs = InputOutputToMessages(column_map={"input": "dialogue", "output": "summary"})(row)[
            "messages"
        ]
    else:
        msgs = ShareGPTToMessages()(row)["messages"]
    return [{"role": m.role, "content": m.text_content} for m in msgs]


def preference_pairs(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """chosen = row i's own answer, rejected = row i+1's answer (cyclic), same prompt."""
    convs = [sft_messages(name, row) for row in rows]
    pairs = []
    for i, conv in enumerate(convs):
        prompt, answer = conv[:-1], conv[-1]
        other = convs[(i + 1) % len(convs)][-1]
        if answer["role"] != "assistant" or other["role"] != "assistant":
            raise AssetError(f"{name} row {i}: the last message is not the assistant's answer")
        pairs.append({"chosen": [*prompt, answer], "rejected": [*prompt, other]})
    return pairs


def pairs_file(dataset: str, rows: int | None, source: str) -> Path:
    """DPO pairs of a template subset (rows given) or of a whole set (rows None)."""
    stem = f"{dataset}-r{rows}" if dataset in TEMPLATES else dataset
    path = data_root() / source / "pairs" / f"{stem}.jsonl"
    if path.is_file():
        return path
    parent = TEMPLATES.get(dataset, dataset)
    if dataset in TEMPLATES:
        base = read_jsonl(
            template_subset(dataset, int(rows or 0), source), DATASETS[parent].columns
        )
    else:
        base = parent_rows(dataset, source)
    pairs = preference_pairs(parent, base)
    with locked():
        if not path.is_file():
            write_jsonl(path, pairs)
    return path


# ---------------------------------------------------------------- torchtune dataset blocks
def dataset_config(dataset: str, method: str, model: str, template_rows: int) -> dict[str, Any]:
    """The `dataset:` block of the torchtune config for a run; files are made here if needed."""
    if dataset not in DATASETS and dataset not in TEMPLATES:
        known = ", ".join([*DATASETS, *TEMPLATES])
        raise AssetError(f"unknown dataset '{dataset}' (known: {known})")
    source = source_for(model)
    parent = parent_of(dataset)
    if method == "dpo":
        rows = template_rows if dataset in TEMPLATES else None
        path = pairs_file(dataset, rows, source)
        read_jsonl(path, ("chosen", "rejected"))
        return {
            "_component_": "torchtune.datasets.preference_dataset",
            "source": "json",
            "data_files": str(path),
            "split": "train",
        }
    if dataset in TEMPLATES:
        path = template_subset(dataset, template_rows, source)
    elif source == "synthetic":
        path = synthetic_parent(dataset)
    else:
        path = local_file(dataset)  # type: ignore[assignment]
        if path is None:
            check_hf_available(parent)
            return {"_component_": parent.builder, "source": parent.hf_id, "split": "train"}
    read_jsonl(path, parent.columns)
    return {
        "_component_": parent.builder,
        "source": "json",
        "data_files": str(path),
        "split": "train",
    }


def count_tokens(ds: Any) -> int:
    """Tokens the model sees for a whole torchtune data set (SFT: tokens; DPO: both sequences)."""
    total = 0
    for i in range(len(ds)):
        sample = ds[i]
        if "tokens" in sample:
            total += len(sample["tokens"])
        else:
            total += len(sample["chosen_input_ids"]) + len(sample["rejected_input_ids"])
    return total


def subset_token_counts(rows: int, model: str = "tiny") -> list[dict[str, Any]]:
    """Token counts of the three template subsets with the model's tokenizer (SFT formatting)."""
    from omegaconf import OmegaConf
    from torchtune import config as tt_config

    from run import llm_spec, llm_tune

    weights = llm_spec.resolve_weights({"model": model, "weights": "auto"})
    out = []
    for template in TEMPLATES:
        tok_cfg, _ = llm_tune.tokenizer_block(model, weights, template)
        tokenizer = tt_config.instantiate(OmegaConf.create(tok_cfg))
        ds_cfg = OmegaConf.create(dataset_config(template, "lora", model, rows))
        ds = tt_config.instantiate(ds_cfg, tokenizer)
        path = Path(ds_cfg.data_files)
        out.append(
            {
                "template": TEMPLATE_LABELS[template],
                "rows": len(ds),
                "tokens": count_tokens(ds),
                "size_kb": round(path.stat().st_size / 1024, 1),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Make the LLM data files; print subset token counts.")
    ap.add_argument("--rows", type=int, action="append", help="template subset size(s)")
    ap.add_argument("--model", default="tiny", choices=("tiny", "llama3_8b"))
    args = ap.parse_args(argv)
    try:
        for rows in args.rows or [500]:
            for row in subset_token_counts(rows, args.model):
                print(json.dumps(row))
    except AssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
