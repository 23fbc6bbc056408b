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

Parents are never held in memory (C4-200M has 185M rows, 3.7 GB): a file is read a line at a time
(a JSON array an element at a time), twice for a subset (count the rows, then keep the chosen
ones, the only rows parsed and checked); a Hugging Face set (Arrow, memory-mapped) gives its
length and the chosen rows with `select`. Whole-set DPO pairs stream from parent to file. Before a
run, a real parent file is checked by its first rows only.

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
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from run.llm.assets import AssetError, data_root, locked

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


def source_for(model: str, data_source: str = "auto") -> str:
    """Where a run's data comes from: a spec's data_source (llm_spec) or, for `auto`, its model."""
    if data_source == "synthetic":
        return "synthetic"
    if data_source == "real":
        return "hf"
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
# Parents can be far larger than memory (C4-200M: 185M rows, 3.7 GB), so every reader here goes
# through a file a row at a time, and a row is only parsed where it is used. The small files we
# generate ourselves (synthetic sets, subsets, pairs) take the same paths.
HEAD_ROWS = 100  # rows a pre-run check of a real parent parses; the rows used are checked in full
ARRAY_CHUNK = 1 << 20  # characters read at a time from a JSON array file
MAX_ROW_CHARS = 64 << 20  # a JSON array element longer than this is reported, not buffered on
_JSON_WS = re.compile(r"[ \t\r\n]*")


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write rows as JSON Lines, atomically, one row at a time (rows may be a generator)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _open(path: Path, mode: str = "rb") -> IO[Any]:
    try:
        return open(path, mode) if "b" in mode else open(path, mode, encoding="utf-8")
    except OSError as exc:
        raise AssetError(f"cannot read data file {path}: {exc.strerror}") from exc


def _is_json_array(path: Path) -> bool:
    with _open(path) as fh:
        while chunk := fh.read(4096):
            head = chunk.lstrip()
            if head:
                return head.startswith(b"[")
    return False


def _bad(path: Path, lineno: int, what: str) -> AssetError:
    return AssetError(f"malformed data file {path} line {lineno}: {what}")


def _jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of the non-blank lines of a JSON Lines file, unparsed."""
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def _parse_line(path: Path, lineno: int, line: bytes) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise _bad(path, lineno, exc.msg) from exc
    except UnicodeDecodeError as exc:
        raise _bad(path, lineno, f"not UTF-8 text ({exc.reason})") from exc


def _array_items(path: Path) -> Iterator[tuple[int, Any]]:
    """(line where it starts, element) of a JSON array file, decoded one element at a time.

    The standard library has no incremental JSON parser, so the file is read in chunks and each
    element is decoded with raw_decode once the buffer holds all of it (an element that does not
    decode is retried with more text until the file ends or MAX_ROW_CHARS is reached).
    """
    decoder = json.JSONDecoder()
    with _open(path, "r") as fh:
        buf, pos, line, eof = "", 0, 1, False

        def more() -> bool:
            nonlocal buf, pos, eof
            try:
                chunk = fh.read(ARRAY_CHUNK)
            except UnicodeDecodeError as exc:
                raise _bad(path, line, f"not UTF-8 text ({exc.reason})") from exc
            if not chunk:
                eof = True
                return False
            buf, pos = buf[pos:] + chunk, 0
            return True

        def skip_ws() -> bool:
            """Advance past whitespace; False at the end of the file."""
            nonlocal pos, line
            while True:
                end = _JSON_WS.match(buf, pos).end()  # type: ignore[union-attr]
                line += buf.count("\n", pos, end)
                pos = end
                if pos < len(buf):
                    return True
                if not more():
                    return False

        if not skip_ws() or buf[pos] != "[":
            raise _bad(path, line, "not a JSON array")
        pos += 1
        first = True
        while True:
            if not skip_ws():
                raise _bad(path, line, "the array is not closed")
            if first and buf[pos] == "]":
                pos += 1
                break
            while True:
                try:
                    item, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if eof or len(buf) - pos > MAX_ROW_CHARS:
                        raise _bad(path, line + buf.count("\n", pos, exc.pos), exc.msg) from exc
                    more()
                    continue
                # a number cut at the chunk's end decodes too early: wait for the next chunk
                if end == len(buf) and not eof and more():
                    continue
                break
            yield line, item
            line += buf.count("\n", pos, end)
            pos, first = end, False
            if not skip_ws():
                raise _bad(path, line, "the array is not closed")
            if buf[pos] == ",":
                pos += 1
            elif buf[pos] == "]":
                pos += 1
                break
            else:
                raise _bad(path, line, "expected ',' or ']' after an element")
        if skip_ws():
            raise _bad(path, line, "extra data after the array")


def _numbered(path: Path) -> tuple[Iterator[tuple[int, Any]], Callable[[int, Any], Any]]:
    """The rows as (line number, raw row) and the function that turns a raw row into its value:
    a JSON Lines row stays bytes until it is used, a JSON array element comes decoded."""
    if _is_json_array(path):
        return _array_items(path), lambda lineno, item: item
    return _jsonl_lines(path), lambda lineno, line: _parse_line(path, lineno, line)


def check_row(path: Path, lineno: int, row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    """The row, or AssetError naming file and line when it is no object or lacks a column."""
    if not isinstance(row, dict):
        raise _bad(path, lineno, "not a JSON object")
    missing = [c for c in columns if c not in row]
    if missing:
        raise _bad(path, lineno, f"missing column(s) {', '.join(missing)}")
    return row


def iter_jsonl(path: Path, columns: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Rows of a JSON Lines (or JSON array) file, one at a time, each checked for `columns`;
    AssetError naming the file and the first bad line, or saying the file holds no rows."""
    n = 0
    raw, parse = _numbered(path)
    for lineno, item in raw:
        yield check_row(path, lineno, parse(lineno, item), columns)
        n += 1
    if not n:
        raise AssetError(f"data file {path} holds no rows")


def read_jsonl(path: Path, columns: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """All rows of a small data file (the ones we generate); parents go through iter_jsonl."""
    return list(iter_jsonl(path, columns))


def count_rows(path: Path) -> int:
    """Rows of a data file without parsing a JSON Lines file (blank lines are no rows)."""
    return sum(1 for _ in _numbered(path)[0])


def select_rows(
    path: Path, indices: list[int], columns: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The rows at the given (sorted, 0-based) row numbers, in file order; only these are parsed
    and checked, and reading stops after the last of them."""
    out: list[dict[str, Any]] = []
    wanted = iter(indices)
    nxt = next(wanted, None)
    if nxt is None:
        return out
    raw, parse = _numbered(path)
    for i, (lineno, item) in enumerate(raw):
        if i == nxt:
            out.append(check_row(path, lineno, parse(lineno, item), columns))
            nxt = next(wanted, None)
            if nxt is None:
                return out
    raise AssetError(f"data file {path} has no row {nxt}")


def check_head(path: Path, columns: tuple[str, ...] = (), rows: int = HEAD_ROWS) -> None:
    """Pre-run check of a data file that may be huge: it exists and its first rows parse and
    have the columns. The rows a run uses are checked in full when they are read."""
    for i, _ in enumerate(iter_jsonl(path, columns), 1):
        if i >= rows:
            break


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


def load_hf(ds: DataSet) -> Any:
    """The parent as a Hugging Face Dataset: Arrow, memory-mapped from the cache, not in memory."""
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


def _hf_columns(ds: DataSet, data: Any) -> None:
    names = getattr(data, "column_names", None)
    missing = [c for c in ds.columns if names is not None and c not in names]
    if missing:
        raise AssetError(f"data set '{ds.name}' ({ds.hf_id}) lacks column(s) {', '.join(missing)}")


def _hf_row(ds: DataSet, i: int, row: Any) -> dict[str, Any]:
    row = dict(row)
    missing = [c for c in ds.columns if c not in row]
    if missing:
        raise AssetError(
            f"data set '{ds.name}' ({ds.hf_id}) row {i}: missing column(s) {', '.join(missing)}"
        )
    return row


def check_hf_available(ds: DataSet) -> None:
    """Pre-run check of a real parent: the first rows of the local file, or the cached set's
    columns; never a pass over the whole set."""
    local = local_file(ds.name)
    if local is not None:
        check_head(local, ds.columns)
        return
    _hf_columns(ds, load_hf(ds))


def iter_parent(name: str, source: str) -> Iterator[dict[str, Any]]:
    """Every row of a parent set, one at a time, each checked for the set's columns."""
    ds = DATASETS[name]
    path = synthetic_parent(name) if source == "synthetic" else local_file(name)
    if path is not None:
        yield from iter_jsonl(path, ds.columns)
        return
    data = load_hf(ds)
    _hf_columns(ds, data)
    n = 0
    for i, row in enumerate(data):  # Arrow rows are read from the memory map as we go
        yield _hf_row(ds, i, row)
        n += 1
    if not n:
        raise AssetError(f"data set '{ds.name}' ({ds.hf_id}) holds no rows")


# ---------------------------------------------------------------- template subsets
def subset_indices(n_parent: int, rows: int, seed: int = SUBSET_SEED) -> list[int]:
    if rows > n_parent:
        raise AssetError(
            f"a {rows}-row subset needs a parent with at least {rows} rows ({n_parent})"
        )
    return sorted(random.Random(seed).sample(range(n_parent), rows))


def subset_rows(name: str, rows: int, source: str) -> list[dict[str, Any]]:
    """The rows of parent `name` at subset_indices(len(parent), rows), in parent order.

    A file parent is read twice, a line at a time: once to count its rows, once to pick the
    chosen ones (only those are parsed and checked). A Hugging Face parent gives its length and
    the chosen rows (Dataset.select) without reading the rest.
    """
    ds = DATASETS[name]
    path = synthetic_parent(name) if source == "synthetic" else local_file(name)
    if path is not None:
        return select_rows(path, subset_indices(count_rows(path), rows), ds.columns)
    data = load_hf(ds)
    _hf_columns(ds, data)
    indices = subset_indices(len(data), rows)
    return [_hf_row(ds, i, row) for i, row in zip(indices, data.select(indices), strict=True)]


def _generated(path: Path, make: Callable[[], Iterable[dict[str, Any]]]) -> Path:
    """Write `path` once from make()'s rows. Under a lock of its own, so that ranks started
    together wait for one pass over a large parent instead of each making one; the lock is per
    file because making a pairs file makes its subset, which makes the synthetic parent."""
    if not path.is_file():
        lock = ".gen-" + path.relative_to(data_root()).as_posix().replace("/", "-") + ".lock"
        with locked(lock):
            if not path.is_file():
                write_jsonl(path, make())
    return path


def template_subset(template: str, rows: int, source: str) -> Path:
    """The k-row subset of a template's parent, written once as JSON Lines."""
    path = data_root() / source / "templates" / f"{template}-r{rows}.jsonl"
    return _generated(path, lambda: subset_rows(TEMPLATES[template], rows, source))


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


def iter_preference_pairs(name: str, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """chosen = row i's own answer, rejected = row i+1's answer (the last row takes row 0's),
    same prompt. One row behind the input, so a whole parent set streams through."""
    first: list[dict[str, str]] | None = None
    prev: list[dict[str, str]] | None = None
    for i, row in enumerate(rows):
        conv = sft_messages(name, row)
        if conv[-1]["role"] != "assistant":
            raise AssetError(f"{name} row {i}: the last message is not the assistant's answer")
        if prev is None:
            first = conv
        else:
            yield {"chosen": prev, "rejected": [*prev[:-1], conv[-1]]}
        prev = conv
    if prev is not None and first is not None:
        yield {"chosen": prev, "rejected": [*prev[:-1], first[-1]]}


def preference_pairs(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """chosen = row i's own answer, rejected = row i+1's answer (cyclic), same prompt."""
    return list(iter_preference_pairs(name, rows))


def pairs_file(dataset: str, rows: int | None, source: str) -> Path:
    """DPO pairs of a template subset (rows given) or of a whole set (rows None, streamed)."""
    stem = f"{dataset}-r{rows}" if dataset in TEMPLATES else dataset
    path = data_root() / source / "pairs" / f"{stem}.jsonl"
    if path.is_file():
        return path
    parent = TEMPLATES.get(dataset, dataset)
    base: Iterable[dict[str, Any]]
    if dataset in TEMPLATES:
        subset = template_subset(dataset, int(rows or 0), source)
        base = iter_jsonl(subset, DATASETS[parent].columns)
    else:
        base = iter_parent(dataset, source)
    return _generated(path, lambda: iter_preference_pairs(parent, base))


# ---------------------------------------------------------------- torchtune dataset blocks
def dataset_config(
    dataset: str, method: str, model: str, template_rows: int, data_source: str = "auto"
) -> dict[str, Any]:
    """The `dataset:` block of the torchtune config for a run; files are made here if needed.

    The files a run trains on are checked before it starts: subsets and synthetic sets in full
    (they are small), a real parent file or a whole-set pairs file by its first rows only (every
    row of those was or will be checked as it is read: pairs are made from checked rows)."""
    if dataset not in DATASETS and dataset not in TEMPLATES:
        known = ", ".join([*DATASETS, *TEMPLATES])
        raise AssetError(f"unknown dataset '{dataset}' (known: {known})")
    source = source_for(model, data_source)
    parent = parent_of(dataset)
    if method == "dpo":
        rows = template_rows if dataset in TEMPLATES else None
        path = pairs_file(dataset, rows, source)
        if rows is None:
            check_head(path, ("chosen", "rejected"))
        else:
            read_jsonl(path, ("chosen", "rejected"))
        return {
            "_component_": "torchtune.datasets.preference_dataset",
            "source": "json",
            "data_files": str(path),
            "split": "train",
        }
    if dataset in TEMPLATES:
        path = template_subset(dataset, template_rows, source)
        read_jsonl(path, parent.columns)
    elif source == "synthetic":
        path = synthetic_parent(dataset)
        read_jsonl(path, parent.columns)
    else:
        local = local_file(dataset)
        if local is None:
            check_hf_available(parent)
            return {"_component_": parent.builder, "source": parent.hf_id, "split": "train"}
        path = local
        check_head(path, parent.columns)
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

    from run.llm import spec as llm_spec
    from run.llm import tune as llm_tune

    out = []
    for template in TEMPLATES:
        spec = {**llm_spec.DEFAULTS, "model": model, "dataset": template, "template_rows": rows}
        tok_cfg, _ = llm_tune.tokenizer_block(llm_spec.canonical(spec))
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
