"""The tiny llama3: its architecture, its files (data/llm/tiny/: the byte tokenizer, model.pt with
random weights in torchtune's key format, meta.json) and its model builders.

The builders take the arguments of torchtune's llama3_8b / lora_llama3_8b / qlora_llama3_8b, so a
config switches between the 8B model and the tiny one by its `_component_` line alone. torchtune
is imported inside them: the config side (and the sweep's preflight) loads no torch.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from run.llm.assets import byte_tokenizer_files, data_root, locked
from run.store import write_json_atomic

if TYPE_CHECKING:
    from torchtune.modules import TransformerDecoder

# Sized for 2 CPU cores (a step of batch 2 takes a fraction of a second) and for quantisation:
# QLoRA's NF4 needs every quantised weight's element count divisible by 64 x 256 (block and
# scaler-block sizes), true of 128 x 128 and 128 x 512 but not of grouped-query k/v projections of
# 128 x 64, hence num_kv_heads = num_heads. QAT's int4 groups must divide each linear layer's input
# width (128 or 512): QAT_TINY_GROUPSIZE here, 256 for Llama3-8B.
TINY_ARCH: dict[str, Any] = {
    "vocab_size": 512,
    "num_layers": 2,
    "num_heads": 4,
    "num_kv_heads": 4,
    "embed_dim": 128,
    "max_seq_len": 1024,
}
QAT_TINY_GROUPSIZE = 32
TINY_SEED = 1234

# torchtune's 8B builders -> ours
TINY_FOR = {
    "torchtune.models.llama3.llama3_8b": "run.llm.tiny.tiny_llama3",
    "torchtune.models.llama3.lora_llama3_8b": "run.llm.tiny.lora_tiny_llama3",
    "torchtune.models.llama3.qlora_llama3_8b": "run.llm.tiny.qlora_tiny_llama3",
}


def tiny_llama3() -> TransformerDecoder:
    from torchtune.models.llama3 import llama3

    return llama3(**TINY_ARCH)


def lora_tiny_llama3(
    lora_attn_modules: list[str], lora_rank: int = 8, lora_alpha: float = 16, **lora: Any
) -> TransformerDecoder:
    """lora_llama3_8b's arguments and defaults, with the tiny architecture."""
    from torchtune.models.llama3 import lora_llama3

    attn = list(lora_attn_modules)
    return lora_llama3(attn, lora_rank=lora_rank, lora_alpha=lora_alpha, **lora, **TINY_ARCH)


qlora_tiny_llama3 = partial(lora_tiny_llama3, quantize_base=True)


def ensure_tiny() -> Path:
    """Build and save the tiny llama3 (random weights, fixed seed) if it is not there yet."""
    folder = data_root() / "tiny"
    model_file = folder / "model.pt"
    meta_file = folder / "meta.json"
    with locked():
        byte_tokenizer_files(folder)
        want = {"arch": TINY_ARCH, "seed": TINY_SEED, "format": "torchtune"}
        if model_file.is_file() and meta_file.is_file():
            if json.loads(meta_file.read_text()) == want:
                return folder
        import torch

        torch.manual_seed(TINY_SEED)
        model = tiny_llama3()
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        tmp = model_file.with_suffix(".pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, model_file)
        write_json_atomic(meta_file, want)
    return folder
