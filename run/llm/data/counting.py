"""Counting the tokens of a tokenised torchtune data set: the recipe extension (run/llm/recipes.py)
records it for a template subset's summary, and run/llm/data/tokens.py prints it. A module of its
own at the bottom of data/, so the recipes need nothing of the config that builds their input."""

from __future__ import annotations

from typing import Any


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
