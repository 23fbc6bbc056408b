"""Reading and writing the LLM data files a row at a time, and the offline Hugging Face loader.

Parents can be far larger than memory (C4-200M: 185M rows, 3.7 GB): a file is read a line (a JSON
array an element) at a time, twice for a subset (count, then pick), and only the rows used are
parsed and checked; a Hugging Face set (Arrow, memory-mapped) gives its length and chosen rows
with `select`. The paper's sets come from the local cache (offline) or LLM_DATASETS_DIR/<name>.jsonl
(or .json), never downloaded. Errors are one line naming the file and the first bad line.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from run import settings, store
from run.llm.assets import AssetError
from run.llm.catalog import DataSet

HEAD_ROWS = 100  # rows a pre-run check of a real parent parses; the rows used are checked in full
ARRAY_CHUNK = 1 << 20  # characters read at a time from a JSON array file
MAX_ROW_CHARS = 64 << 20  # a JSON array element longer than this is reported, not buffered on
_JSON_WS = re.compile(r"[ \t\r\n]*")


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Write rows as JSON Lines, atomically, one row at a time (rows may be a generator)."""
    with store.atomic_file(path) as fh:
        for row in rows:
            fh.write(json.dumps(row, sort_keys=True) + "\n")


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
    """(line where it starts, element) of a JSON array file, one element at a time: the standard
    library has no incremental parser, so an element that does not decode yet is retried with
    more text until the file ends or MAX_ROW_CHARS is reached."""
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
                    # a number cut at the chunk's end decodes too early: wait for the next chunk
                    if end < len(buf) or eof or not more():
                        break
                except json.JSONDecodeError as exc:
                    if eof or len(buf) - pos > MAX_ROW_CHARS:
                        raise _bad(path, line + buf.count("\n", pos, exc.pos), exc.msg) from exc
                    more()
            yield line, item
            line += buf.count("\n", pos, end)
            pos, first = end, False
            if not skip_ws():
                raise _bad(path, line, "the array is not closed")
            if buf[pos] not in ",]":
                raise _bad(path, line, "expected ',' or ']' after an element")
            pos += 1
            if buf[pos - 1] == "]":
                break
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
    """Pre-run check of a data file that may be huge: its first rows parse and have the columns
    (the rows a run uses are checked in full when they are read)."""
    for _ in itertools.islice(iter_jsonl(path, columns), rows):
        pass


def local_file(name: str) -> Path | None:
    folder = settings.value("LLM_DATASETS_DIR")
    if not folder:
        return None
    for suffix in (".jsonl", ".json"):
        path = folder.expanduser() / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def load_hf(ds: DataSet) -> Any:
    """The parent as a Hugging Face Dataset: Arrow, memory-mapped from the cache, not in memory.
    Never from the network: both libraries read their offline switch (HF_HUB_OFFLINE) once, at
    import, and torchtune's import may have come first, so it is set on them for this call only
    (not in the environment, which the process's later work would inherit)."""
    import datasets.config
    import huggingface_hub.constants as hub
    from datasets import load_dataset

    before = datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        return load_dataset(ds.hf_id, split="train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many types for "not cached"
        raise AssetError(
            f"data set '{ds.name}' ({ds.hf_id}) is not in the local Hugging Face cache and "
            f"LLM_DATASETS_DIR has no {ds.name}.jsonl: fetch it on a machine with network "
            f"(`datasets.load_dataset('{ds.hf_id}')`) or put the file there "
            f"({type(exc).__name__})"
        ) from exc
    finally:
        datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = before


def check_hf_columns(ds: DataSet, data: Any) -> None:
    """AssetError when a loaded Hugging Face set lacks one of the parent's columns."""
    names = getattr(data, "column_names", None)
    missing = [c for c in ds.columns if names is not None and c not in names]
    if missing:
        raise AssetError(f"data set '{ds.name}' ({ds.hf_id}) lacks column(s) {', '.join(missing)}")


def hf_row(ds: DataSet, i: int, row: Any) -> dict[str, Any]:
    """Row i of a Hugging Face set as a plain dict, or AssetError naming the missing columns."""
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
    check_hf_columns(ds, load_hf(ds))
