"""Model builders of the tiny llama3, named by `_component_` in the configs for `model: tiny`.

They take the same arguments as torchtune's llama3_8b / lora_llama3_8b / qlora_llama3_8b, so a
config switches between the 8B model and the tiny one by its `_component_` line alone.
"""

from __future__ import annotations

from functools import partial

from torchtune.models.llama3 import llama3, lora_llama3
from torchtune.modules import TransformerDecoder

from run.llm.assets import TINY_ARCH

# torchtune component path of each 8B builder -> ours (used by run/llm/tune.py)
TINY_FOR = {
    "torchtune.models.llama3.llama3_8b": "run.llm.tiny.tiny_llama3",
    "torchtune.models.llama3.lora_llama3_8b": "run.llm.tiny.lora_tiny_llama3",
    "torchtune.models.llama3.qlora_llama3_8b": "run.llm.tiny.qlora_tiny_llama3",
}


def tiny_llama3() -> TransformerDecoder:
    return llama3(**TINY_ARCH)


def lora_tiny_llama3(
    lora_attn_modules: list[str],
    apply_lora_to_mlp: bool = False,
    apply_lora_to_output: bool = False,
    lora_rank: int = 8,
    lora_alpha: float = 16,
    lora_dropout: float = 0.0,
    use_dora: bool = False,
    quantize_base: bool = False,
) -> TransformerDecoder:
    return lora_llama3(
        lora_attn_modules=list(lora_attn_modules),
        apply_lora_to_mlp=apply_lora_to_mlp,
        apply_lora_to_output=apply_lora_to_output,
        lora_rank=lora_rank,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        use_dora=use_dora,
        quantize_base=quantize_base,
        **TINY_ARCH,
    )


qlora_tiny_llama3 = partial(lora_tiny_llama3, quantize_base=True)
