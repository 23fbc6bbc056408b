"""The paper's published times, read from reference/paper/*.csv (never retyped): the anchors of the
cost model (run/sweep/cost.py) and the paper's node, which a plan for a GPU scale assumes."""

from __future__ import annotations

import csv
import functools
from typing import Any

from run import store
from run.llm import spec as llm_spec

PAPER_GPU = "H100"  # the paper's node: 4 x NVIDIA H100-94 SXM5 (EXPERIMENTS.md)
# Table 4 names a template per parent set; template_subsets.csv spells two of them differently.
TEMPLATE_ALIASES = {"Summarize": "Summary", "Grammar Error Correction": "Error Correction"}


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(store.REFERENCE_DIR / name) as fh:
        return list(csv.DictReader(fh))


@functools.cache
def _table(name: str, key: str, column: str) -> dict[tuple[int, Any], float]:
    """A paper table by (gpus, key): precision lower-case, pin_memory as a bool."""
    return {
        (int(r["gpus"]), r[key].lower() if key == "precision" else r[key] == "true"): float(
            r[column]
        )
        for r in _read_csv(name)
    }


def table2() -> dict[tuple[int, str], float]:
    """Table 2: total seconds by (gpus, precision)."""
    return _table("table2_precision.csv", "precision", "total_time_s")


def table3() -> dict[tuple[int, bool], float]:
    """Table 3: total seconds by (gpus, pin_memory)."""
    return _table("table3_pin_memory_vision.csv", "pin_memory", "total_time_s")


def table5() -> dict[tuple[int, bool], float]:
    """Table 5: LoRA s/it by (gpus, pin_memory)."""
    return _table("table5_pin_memory_llm.csv", "pin_memory", "iteration_time_s_per_it")


def paper_node_gpus() -> int:
    """The paper's node, which a plan for a GPU scale assumes on a machine without GPUs: the
    largest GPU count of Table 2 (4)."""
    return max(g for g, _ in table2())


@functools.cache
def tokens_per_row() -> dict[str, float]:
    """Llama3 tokens per row for every data set of llm_spec.DATASETS, from the paper's CSVs."""
    per_template = {
        r["template"]: float(r["tokens"]) / float(r["rows"])
        for r in _read_csv("template_subsets.csv")
    }
    from run.llm.catalog import TEMPLATE_LABELS

    out = {d: per_template[t] for d, t in TEMPLATE_LABELS.items()}
    by_name = {r["dataset"]: r["template"] for r in _read_csv("table4_llm_datasets.csv")}
    for ours, theirs in llm_spec.PAPER_DATASET_NAMES.items():
        template = by_name[theirs]
        out[ours] = per_template[TEMPLATE_ALIASES.get(template, template)]
    return out
