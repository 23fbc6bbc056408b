"""Model files every LLM run shares: the data folder (LLM_DATA_ROOT, data/llm/) and its lock, the
byte tokenizer and the real Llama3-8B folder; run/llm/tiny.py builds the tiny llama3's own files.
What we generate is written atomically and deterministically, so a fresh clone makes the same
files. LLAMA3_DIR holds Meta's `original/consolidated.00.pth` or the Hugging Face safetensors
layout, and `original/tokenizer.model`; `weights: random` reads no checkpoint (weights.py).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from run import settings
from run.errors import UserError
from run.store import write_json_atomic, write_text_atomic

# The 13 llama3 special tokens torchtune's Llama3Tokenizer looks up, placed right after the bytes.
SPECIAL_TOKENS = (
    "<|begin_of_text|> <|end_of_text|> <|reserved_special_token_0|> <|reserved_special_token_1|> "
    "<|finetune_right_pad_id|> <|step_id|> <|start_header_id|> <|end_header_id|> <|eom_id|> "
    "<|eot_id|> <|python_tag|> <|image|> <|video|>"
).split()


class AssetError(UserError):
    """A model, tokenizer or data file that is missing or unusable; the message is one line."""


def data_root() -> Path:
    return settings.value("LLM_DATA_ROOT")


@contextlib.contextmanager
def locked(name: str = ".lock") -> Iterator[None]:
    """Serialise generation between processes (two ranks, or two sweeps started by make -j)."""
    root = data_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / name, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def byte_tokenizer_files(folder: Path) -> tuple[Path, Path]:
    """Write (once) a llama3-compatible tokenizer whose vocabulary is the 256 bytes (a tiktoken
    BPE file, ranks 0..255, and the special tokens at 256.., HF added_tokens): every text
    round-trips, in sequences about 4x longer than with Llama3's 128k vocabulary."""
    model = folder / "tokenizer.model"
    special = folder / "special_tokens.json"
    if not model.is_file():
        lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
        write_text_atomic(model, "\n".join(lines) + "\n")
    if not special.is_file():
        added = [{"id": 256 + i, "content": tok} for i, tok in enumerate(SPECIAL_TOKENS)]
        write_json_atomic(special, {"added_tokens": added})
    return model, special


def llama3_dir() -> Path | None:
    value = settings.value("LLAMA3_DIR")
    return value.expanduser() if value else None


def real_checkpointer(folder: Path) -> dict[str, Any]:
    """The torchtune checkpointer block for a Llama3-8B folder, or AssetError saying what is off."""
    if not folder.is_dir():
        raise AssetError(f"LLAMA3_DIR={folder} is not a folder")
    meta = folder / "original" / "consolidated.00.pth"
    if not meta.is_file() and (folder / "consolidated.00.pth").is_file():
        meta = folder / "consolidated.00.pth"
    shards = sorted(p.name for p in folder.glob("model-*-of-*.safetensors"))
    if meta.is_file():
        kind, folder, files = "Meta", meta.parent, [meta.name]
    elif shards and (folder / "config.json").is_file():
        kind, files = "HF", shards
    else:
        raise AssetError(
            f"no Llama3-8B checkpoint in LLAMA3_DIR={folder}: expected "
            "original/consolidated.00.pth or model-0000N-of-00004.safetensors with config.json"
        )
    return {
        "_component_": f"torchtune.training.FullModel{kind}Checkpointer",
        "checkpoint_dir": str(folder),
        "checkpoint_files": files,
        "model_type": "LLAMA3",
    }


def real_tokenizer(folder: Path) -> Path:
    if not folder.is_dir():
        raise AssetError(f"LLAMA3_DIR={folder} is not a folder")
    for candidate in (folder / "original" / "tokenizer.model", folder / "tokenizer.model"):
        if candidate.is_file():
            return candidate
    raise AssetError(f"no tokenizer.model in LLAMA3_DIR={folder} (looked in original/ and the top)")


def llama3_tokenizer_file() -> Path:
    """Meta's Llama3 tokenizer.model: LLAMA3_TOKENIZER, else inside LLAMA3_DIR."""
    value = settings.value("LLAMA3_TOKENIZER")
    if value:
        path = value.expanduser()
        if not path.is_file():
            raise AssetError(f"LLAMA3_TOKENIZER={path} is not a file")
        return path
    folder = llama3_dir()
    if folder is None:
        raise AssetError(
            "tokenizer 'llama3' needs LLAMA3_TOKENIZER (a tokenizer.model file) or LLAMA3_DIR"
        )
    return real_tokenizer(folder)
