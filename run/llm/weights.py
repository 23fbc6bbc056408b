"""The `random` weights mode: Llama3-8B's architecture with random weights, no checkpoint read.

RandomWeightsCheckpointer's state dict makes each tensor when the recipe reads it: norm scales 1,
every other weight N(0, std) from a generator seeded by (seed, key), so two ranks or two runs see
the same weights. The recipe loads them through its own path (QLoRA quantises them, FSDP shards
them), so time and memory are real; the loss is meaningless. They are made on the rank's GPU when
there is one: seconds against about a minute of serial CPU work, and 4 ranks never each hold a
32 GB copy in host memory (the values then differ from a CPU run's).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch
from torchtune.config._utils import _get_component_from_path

from run import settings


def weights_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", settings.local_rank())
    return torch.device("cpu")


class RandomStateDict(MutableMapping):
    def __init__(self, shapes: dict[str, tuple[torch.Size, torch.dtype]], seed: int, std: float):
        self._shapes = shapes
        self._made: dict[str, torch.Tensor] = {}
        self._seed = seed
        self._std = std
        self._device = weights_device()

    def _make(self, key: str) -> torch.Tensor:
        shape, dtype = self._shapes[key]
        if key.endswith("norm.scale"):
            return torch.ones(shape, dtype=dtype, device=self._device)
        gen = torch.Generator(device=self._device)
        gen.manual_seed(self._seed * 1_000_003 + zlib.crc32(key.encode()))
        out = torch.empty(shape, dtype=dtype, device=self._device)
        return out.normal_(0.0, self._std, generator=gen)

    def __getitem__(self, key: str) -> torch.Tensor:
        if key not in self._made:
            if key not in self._shapes:
                raise KeyError(key)
            return self._make(key)
        return self._made[key]

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self._made[key] = value

    def __delitem__(self, key: str) -> None:
        self._made.pop(key, None)
        self._shapes.pop(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)


class RandomWeightsCheckpointer:
    """A torchtune checkpointer that loads random weights of `base_model` (a builder path)."""

    def __init__(
        self,
        base_model: str = "torchtune.models.llama3.llama3_8b",
        seed: int = 0,
        std: float = 0.02,
        dtype: str = "fp32",
        **_: Any,  # output_dir, model_type, should_load_recipe_state: accepted, unused
    ):
        self.base_model = base_model
        self.seed = seed
        self.std = std
        self.dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]

    def load_checkpoint(self) -> dict[str, Any]:
        with torch.device("meta"):
            model = _get_component_from_path(self.base_model)()
        shapes = {k: (v.shape, self.dtype) for k, v in model.state_dict().items()}
        return {"model": RandomStateDict(shapes, self.seed, self.std)}

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("random weights are not saved (save_final_checkpoint must stay off)")
