"""What a run trains on: the template subsets, the DPO preference pairs, and the `dataset:` block
of the torchtune config that points at them.

A template subset is `sorted(random.Random(0).sample(range(len(parent)), template_rows))` of its
parent, in parent order. DPO pairs are our assumption (the paper does not say): for row i, the
prompt as the SFT recipe presents it, `chosen` its own answer, `rejected` row i+1's (the last row
takes row 0's), so DPO compute matches SFT-like sequence lengths. Readers are called through
their module (`readers.load_hf`), so a test that replaces one replaces it here too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from run.llm.assets import AssetError, data_root, locked
from run.llm.catalog import DATASETS, SUBSET_SEED, TEMPLATES, parent_of, source_for
from run.llm.data import readers
from run.llm.data.synthetic import synthetic_parent


def parent_file(name: str, source: str) -> Path | None:
    """The file of a parent set: the generated one, or LLM_DATASETS_DIR's (None: the HF cache)."""
    return synthetic_parent(name) if source == "synthetic" else readers.local_file(name)


def iter_parent(name: str, source: str) -> Iterator[dict[str, Any]]:
    """Every row of a parent set, one at a time, each checked for the set's columns."""
    ds = DATASETS[name]
    path = parent_file(name, source)
    if path is not None:
        yield from readers.iter_jsonl(path, ds.columns)
        return
    data = readers.load_hf(ds)
    readers.check_hf_columns(ds, data)
    n = 0
    for i, row in enumerate(data):  # Arrow rows are read from the memory map as we go
        yield readers.hf_row(ds, i, row)
        n += 1
    if not n:
        raise AssetError(f"data set '{ds.name}' ({ds.hf_id}) holds no rows")


# ---------------------------------------------------------------- template subsets
def subset_indices(n_parent: int, rows: int, seed: int = SUBSET_SEED) -> list[int]:
    """The row numbers of a `rows`-row subset of an `n_parent`-row parent, seeded, in order."""
    if rows > n_parent:
        raise AssetError(
            f"a {rows}-row subset needs a parent with at least {rows} rows ({n_parent})"
        )
    return sorted(random.Random(seed).sample(range(n_parent), rows))


def subset_rows(name: str, rows: int, source: str) -> list[dict[str, Any]]:
    """The rows of parent `name` at subset_indices(len(parent), rows), in parent order."""
    ds = DATASETS[name]
    path = parent_file(name, source)
    if path is not None:
        return readers.select_rows(path, subset_indices(readers.count_rows(path), rows), ds.columns)
    data = readers.load_hf(ds)
    readers.check_hf_columns(ds, data)
    indices = subset_indices(len(data), rows)
    return [
        readers.hf_row(ds, i, row) for i, row in zip(indices, data.select(indices), strict=True)
    ]


def _generated(path: Path, make: Callable[[], Iterable[dict[str, Any]]]) -> Path:
    """Write `path` once from make()'s rows. Under a lock of its own, so that ranks started
    together wait for one pass over a large parent instead of each making one; the lock is per
    file because making a pairs file makes its subset, which makes the synthetic parent."""
    if not path.is_file():
        lock = ".gen-" + path.relative_to(data_root()).as_posix().replace("/", "-") + ".lock"
        with locked(lock):
            if not path.is_file():
                readers.write_jsonl(path, make())
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
        transform: Any = AlpacaToMessages(train_on_input=False)
    elif name == "grammar":
        transform = InputOutputToMessages()
    elif name == "samsum":
        transform = InputOutputToMessages(column_map={"input": "dialogue", "output": "summary"})
    else:
        transform = ShareGPTToMessages()
    return [{"role": m.role, "content": m.text_content} for m in transform(row)["messages"]]


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
        base = readers.iter_jsonl(subset, DATASETS[parent].columns)
    else:
        base = iter_parent(dataset, source)
    return _generated(path, lambda: iter_preference_pairs(parent, base))


# ---------------------------------------------------------------- torchtune dataset blocks
def dataset_config(
    dataset: str, method: str, model: str, template_rows: int, data_source: str = "auto"
) -> dict[str, Any]:
    """The `dataset:` block of the torchtune config for a run; files are made here if needed.
    Subsets and synthetic sets are checked in full before the run (they are small); a real parent
    file or whole-set pairs by their first rows (pairs are made from checked rows)."""
    if dataset not in DATASETS and dataset not in TEMPLATES:
        known = ", ".join([*DATASETS, *TEMPLATES])
        raise AssetError(f"unknown dataset '{dataset}' (known: {known})")
    source = source_for(model, data_source)
    parent = parent_of(dataset)
    component, columns, whole = parent.builder, parent.columns, dataset not in TEMPLATES
    if method == "dpo":
        component, columns = "torchtune.datasets.preference_dataset", ("chosen", "rejected")
        path = pairs_file(dataset, None if whole else template_rows, source)
    elif not whole:
        path = template_subset(dataset, template_rows, source)
    elif source == "synthetic":
        path, whole = synthetic_parent(dataset), False
    else:
        path = readers.local_file(dataset)
        if path is None:
            readers.check_hf_available(parent)
            return {"_component_": parent.builder, "source": parent.hf_id, "split": "train"}
    if whole:
        readers.check_head(path, columns)
    else:
        readers.read_jsonl(path, columns)
    return {"_component_": component, "source": "json", "data_files": str(path), "split": "train"}
