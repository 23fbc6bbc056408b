"""Fetch what PROFILE=quick and paper read, on a node with network: `make assets HF_TOKEN=hf_...`.

    python -m run.assets [--only mnist|model|datasets ...]

What it fetches, from where, and how it resumes: README ("Data"). Token and licence are checked
before any download; bad conditions are one line `error: ...`, exit status 2.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from run import settings
from run.errors import UserError
from run.llm.assets import AssetError, data_root, llama3_dir, real_checkpointer, real_tokenizer
from run.llm.catalog import DATASETS
from run.llm.data.readers import check_row, iter_jsonl, write_jsonl
from run.program import program

MODEL_REPO = "meta-llama/Meta-Llama-3-8B-Instruct"
MODEL_IGNORE = "original/consolidated.00.pth"
MODEL_NAME = "Llama3-8B-Instruct"
# No quick or paper run reads more than about 10,000 rows of grammar (L1: 1,000 steps x batch 2 x
# 4 ranks; the error-correction subset: 500), so 200,000 rows is 20x that; C4-200M whole is 185M.
GRAMMAR_ROWS = 200_000
PARQUET_REVISION = "refs/convert/parquet"
DATA_SUFFIXES = (".jsonl", ".json", ".parquet")
MNIST_COUNTS = {"train": 60000, "test": 10000}
ASSETS = ("mnist", "model", "datasets")


class FetchError(UserError):
    """Something `make assets` cannot get; one line that says what to do."""


@dataclass
class Got:
    name: str
    path: Path
    note: str  # fetched now, or already there

    def size(self) -> int:
        if self.path.is_file():
            return self.path.stat().st_size
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def causes(exc: BaseException) -> list[BaseException]:
    """exc and what it was raised from (hf_hub_download wraps a failed request in
    LocalEntryNotFoundError)."""
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def _offline(exc: BaseException) -> bool:
    # huggingface_hub 2.x speaks httpx2, older releases httpx: the transport's class names
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"ConnectError", "TimeoutException", "ConnectionError", "gaierror"})


def explain(exc: BaseException, what: str) -> FetchError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo = "/".join(what.split("/")[:2])  # `what` is a repo, or a file inside one
    for e in causes(exc):
        if isinstance(e, GatedRepoError):
            return FetchError(
                f"{what}: the Hub refuses the token ({e.response.status_code}, gated repository): "
                f"accept the licence at https://huggingface.co/{repo} with the account of "
                "HF_TOKEN, wait for the approval e-mail, then run `make assets HF_TOKEN=hf_...` "
                "again"
            )
        if _offline(e):
            return FetchError(
                f"{what}: cannot reach {endpoint()} ({type(e).__name__}): run `make assets` on a "
                "node with network, or set HF_ENDPOINT to a reachable mirror"
            )
        if isinstance(e, RevisionNotFoundError):
            return FetchError(f"{what}: revision not found on {endpoint()} (404)")
        if isinstance(e, RepositoryNotFoundError):
            return FetchError(
                f"{what}: repository not found on {endpoint()} (or the token cannot see it)"
            )
        if isinstance(e, HfHubHTTPError) and e.response is not None:
            r = e.response
            if r.status_code == 401:
                return FetchError(
                    f"{what}: the Hub rejects HF_TOKEN (401): make a new token at "
                    "https://huggingface.co/settings/tokens and pass HF_TOKEN=hf_..."
                )
            return FetchError(f"{what}: HTTP {r.status_code} from {r.url}")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return FetchError(f"{what}: {type(exc).__name__}: {first[:200]}")


# ---------------------------------------------------------------- MNIST
def fetch_mnist(root: Path) -> Got:
    """Real MNIST with torchvision's downloader (md5-checked), via a .partial folder."""
    from run.vision import digits

    def complete(r: Path) -> bool:
        try:
            have = digits.existing_counts(r)
        except ValueError:
            return False
        return have is not None and all(have[k] >= n for k, n in MNIST_COUNTS.items())

    if complete(root):
        return Got("MNIST", digits.raw_dir(root), "already there")
    if digits.raw_dir(root).exists():
        raise FetchError(
            f"{digits.raw_dir(root)} exists but is not complete MNIST: move it away and run again"
        )
    from run.vision.tvcompat import import_torchvision

    staging = root.with_name(root.name + ".partial")
    try:
        # torchvision skips files whose md5 matches and downloads the rest: a retry resumes
        import_torchvision().datasets.MNIST(str(staging), download=True)
    except Exception as exc:  # noqa: BLE001 - urllib, http and md5 errors: all one line
        raise FetchError(
            f"MNIST: download failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); "
            f"run `make assets` on a node with network; {staging} keeps what arrived"
        ) from exc
    if not complete(staging):
        raise FetchError(f"MNIST: torchvision finished but {staging} lacks images")
    root.mkdir(parents=True, exist_ok=True)
    os.replace(digits.raw_dir(staging).parent, root / "MNIST")
    shutil.rmtree(staging, ignore_errors=True)
    return Got("MNIST", digits.raw_dir(root), "fetched")


# ---------------------------------------------------------------- the model
def model_dir() -> Path:
    return llama3_dir() or data_root() / "Meta-Llama-3-8B-Instruct"


def model_complete(folder: Path) -> bool:
    try:
        real_checkpointer(folder)
        real_tokenizer(folder)
    except AssetError:
        return False
    return True


def hf_token() -> str:
    """HF_TOKEN, else the token `hf auth login` cached."""
    from huggingface_hub import get_token

    token = settings.value("HF_TOKEN") or get_token()
    if not token:
        raise FetchError(
            f"no Hugging Face token: {MODEL_REPO} is gated; run `make assets HF_TOKEN=hf_...` "
            "with a token (https://huggingface.co/settings/tokens) of an account that accepted "
            "the Llama 3 licence"
        )
    return token


def fetch_model(folder: Path, token: str) -> Got:
    staging = folder.with_name(folder.name + ".partial")
    tune = Path(sys.executable).parent / "tune"
    cmd = [str(tune)] if tune.is_file() else [sys.executable, "-m", "torchtune._cli.tune"]
    cmd += ["download", MODEL_REPO, "--output-dir", str(staging)]
    cmd += ["--ignore-patterns", MODEL_IGNORE]
    proc = subprocess.run(
        cmd, env={**os.environ, "HF_TOKEN": token}, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        lines = [
            ln for ln in proc.stderr.splitlines() if ln.strip() and "Skipping import" not in ln
        ]
        last = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else "")
        raise FetchError(
            f"tune download {MODEL_REPO} failed (exit {proc.returncode}): {last.strip()[:300]}; "
            f"run again to resume ({staging} keeps the partial files)"
        )
    if not model_complete(staging):
        raise FetchError(f"tune download finished but {staging} holds no checkpoint or tokenizer")
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, folder)
    return Got(MODEL_NAME, folder, "fetched")


# ---------------------------------------------------------------- data sets
def datasets_dir() -> Path:
    value = settings.value("LLM_DATASETS_DIR")
    return value.expanduser() if value else data_root() / "datasets"


def train_files(paths: list[str]) -> list[str]:
    data = [p for p in paths if p.endswith(DATA_SUFFIXES) and not Path(p).name.startswith(".")]
    data = [p for p in data if Path(p).name not in ("dataset_infos.json", "dataset_info.json")]
    held_out = ("test", "validation", "valid", "dev")
    data = [p for p in data if not any(h in Path(p).parts or h in Path(p).stem for h in held_out)]
    return sorted(data)


def choose_files(repo_id: str) -> tuple[str, list[str]]:
    from huggingface_hub import HfApi

    api = HfApi()
    for revision in ("main", PARQUET_REVISION):
        try:
            info = api.dataset_info(repo_id, revision=revision)
        except Exception as exc:  # noqa: BLE001
            from huggingface_hub.errors import RevisionNotFoundError

            if revision != "main" and isinstance(exc, RevisionNotFoundError):
                break
            raise explain(exc, repo_id) from exc
        files = train_files([s.rfilename for s in info.siblings or []])
        if files:
            return revision, files
    raise FetchError(
        f"{repo_id}: no JSON, JSON Lines or Parquet train files on main or {PARQUET_REVISION}; "
        "put the set as JSON Lines in LLM_DATASETS_DIR yourself"
    )


def rows_of(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                n += 1
                yield check_row(path, n, row, columns)
        return
    yield from iter_jsonl(path, columns)


def fetch_dataset(name: str, folder: Path, token: str | None) -> Got:
    from huggingface_hub import hf_hub_download

    ds = DATASETS[name]
    out = folder / f"{name}.jsonl"
    if out.is_file():
        return Got(f"{name} ({ds.hf_id})", out, "already there")
    revision, files = choose_files(ds.hf_id)
    limit = GRAMMAR_ROWS if name == "grammar" else None

    def rows() -> Iterator[dict[str, Any]]:
        for f in files:  # a file is downloaded only when the rows before it fell short
            try:
                local = hf_hub_download(
                    ds.hf_id, f, repo_type="dataset", revision=revision, token=token
                )
            except Exception as exc:  # noqa: BLE001
                raise explain(exc, f"{ds.hf_id}/{f}") from exc
            yield from rows_of(Path(local), ds.columns)

    write_jsonl(out, itertools.islice(rows(), limit))
    note = f"fetched from {revision}" + (f", first {limit:,} rows" if limit else "")
    return Got(f"{name} ({ds.hf_id})", out, note)


# ---------------------------------------------------------------- all of it
def human(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def fetch(only: list[str]) -> list[Got]:
    from run.vision import digits

    got: list[Got] = []
    folder = model_dir()
    token = None
    need_model = "model" in only and not model_complete(folder)
    if need_model:
        if folder.exists():
            raise FetchError(
                f"{folder} exists but holds no Llama3-8B checkpoint and tokenizer: "
                "move it away (or set LLAMA3_DIR elsewhere) and run again"
            )
        token = hf_token()
        from huggingface_hub import HfApi

        # before anything is written; a new HfApi reads the endpoint now (the module-level
        # auth_check kept the one at import)
        try:
            HfApi().auth_check(MODEL_REPO, token=token)
        except Exception as exc:  # noqa: BLE001 - explain() names every kind
            raise explain(exc, MODEL_REPO) from exc
    if "mnist" in only:
        got.append(fetch_mnist(digits.data_root("mnist")))
    if "model" in only:
        done = need_model and token
        got.append(fetch_model(folder, token) if done else Got(MODEL_NAME, folder, "already there"))
    if "datasets" in only:
        public = token or settings.value("HF_TOKEN") or None
        for name in DATASETS:
            got.append(fetch_dataset(name, datasets_dir(), public))
    return got


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m run.assets",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    ap.add_argument("--only", action="append", choices=ASSETS, help="fetch only these (repeatable)")
    args = ap.parse_args(argv)
    got = fetch(args.only or list(ASSETS))
    total = 0
    for g in got:
        size = g.size()
        total += size
        print(f"{g.name:<42} {human(size):>10}  {g.path}  ({g.note})")
    print(f"{'total':<42} {human(total):>10}")
    exports = []
    if any(g.name.startswith("Llama3") for g in got) and not settings.given("LLAMA3_DIR"):
        exports.append(f"LLAMA3_DIR={model_dir()}")
    if any(g.path.suffix == ".jsonl" for g in got) and not settings.given("LLM_DATASETS_DIR"):
        exports.append(f"LLM_DATASETS_DIR={datasets_dir()}")
    if exports:
        print(f"runs use them with: export {' '.join(exports)}")
    return 0
