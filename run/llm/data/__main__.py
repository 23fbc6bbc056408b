"""Make the LLM data files and print the token counts of the template subsets:

    python -m run.llm.data --rows 500            # one JSON line per template subset
    python -m run.llm.data --rows 8 --rows 500 --model llama3_8b

The counts use the model's tokenizer and the SFT formatting a LoRA run trains on, so they compare
with the journal's token counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from run.llm import config as llm_config
from run.llm import spec as llm_spec
from run.llm.catalog import TEMPLATE_LABELS, TEMPLATES
from run.llm.data.subsets import dataset_config
from run.llm.recipes import count_tokens
from run.program import program


def subset_token_counts(rows: int, model: str = "tiny") -> list[dict[str, Any]]:
    """Token counts of the three template subsets with the model's tokenizer (SFT formatting)."""
    from omegaconf import OmegaConf
    from torchtune import config as tt_config

    out = []
    for template in TEMPLATES:
        spec = {**llm_spec.DEFAULTS, "model": model, "dataset": template, "template_rows": rows}
        tok_cfg, _ = llm_config.tokenizer_block(llm_spec.canonical(spec))
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


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m run.llm.data",
        description="Make the LLM data files; print subset token counts.",
    )
    ap.add_argument("--rows", type=int, action="append", help="template subset size(s)")
    ap.add_argument("--model", default="tiny", choices=("tiny", "llama3_8b"))
    args = ap.parse_args(argv)
    for rows in args.rows or [500]:
        for row in subset_token_counts(rows, args.model):
            print(json.dumps(row))
    return 0


sys.exit(main())
