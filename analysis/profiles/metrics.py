"""The tidy profiler-metrics table shared by the nsys and torch.profiler readers.

One row per (run, rank, source, raw name). `metric` is the normalised name from METRICS (the
paper's) or LAUNCH_METRICS (the other kernel-launch APIs) so that an nsys `cudaLaunchKernel_v7000`
and a torch `cudaLaunchKernel` land in the same bucket; the raw name stays in `raw_name`.
A metric absent from a profile gets no row: what an absence means is decided downstream
(coverage.py, artifact.py).

`share` = total_s / profiled wall time of that rank: calls overlapping on several threads or
streams are summed, so it can exceed 1 (kept as measured, not clipped). WALL_COLUMNS carry that
wall, the span it came from and the CUDA activity span, so a reader of the CSV can tell a share
of nsys's capture window from one of its whole session. `calls` counts operations: one per API
call (the second row per call of an export with CUDA backtraces is dropped) and one per copy (a
batched-copy record counts every copy of its batch).

Plain rows throughout, read and written without pandas (`write_rows_atomic` writes what pandas
reads back as the same values): importing pandas costs more memory and start-up time than
reading a small profile; only the artifact's frames (artifact.py) use it.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

COLUMNS = ["run", "rank", "source", "metric", "raw_name", "calls", "total_s", "bytes", "share"]
# Trailing columns (readers always write them; tables built by hand may omit them).
WALL_COLUMNS = ["wall_s", "activity_s", "wall_from", "device_kind"]

# Normalised metric name -> what the paper (J Table 1) calls it.
METRICS: dict[str, str] = {
    "cudaLaunchKernel": "cudaLaunchKernel",
    "cudaStreamSynchronize": "cudaStreamSynchronize",
    "cudaEventSynchronize": "cudaEventSynchronize",
    "cudaEventDestroy": "cudaEventDestroy",
    "cudaMemcpyAsync": "cudaMemcpyAsync",
    "memcpy_htod": "CUDA memcpy Host-to-Device",
    "memcpy_dtoh": "CUDA memcpy Device-to-Host",
    "memcpy_dtod": "CUDA memcpy Device-to-Device",
    "nccl_allgather_ring_ll": "ncclDevKernel_AllGather_RING_LL",
    "nccl_broadcast": "ncclDevKernel_Broadcast",
    "nccl_other": "other NCCL kernels (ncclDevKernel_* / ncclKernel_*)",
}
# Every API that launches kernels: recent cuBLAS, cuDNN and NCCL launch many kernels through
# others than the paper's cudaLaunchKernel (real H100 traces hold them).
LAUNCH_APIS: tuple[str, ...] = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaGraphLaunch",
)
LAUNCH_METRICS: dict[str, str] = {m: m for m in LAUNCH_APIS if m not in METRICS}
KERNEL_LAUNCH_ALL = "kernel_launch_all"
# Unified (managed) memory migrations, copy kinds of their own in nsys: one metric for every
# direction; the direction stays in `raw_name`.
MEMCPY_UNIFIED = "memcpy_unified"
COPY_METRICS: dict[str, str] = {
    MEMCPY_UNIFIED: "CUDA memcpy Unified (managed memory page migrations, every direction)",
}
# Computed from other rows, never in a metrics CSV.
DERIVED_METRICS: dict[str, str] = {
    KERNEL_LAUNCH_ALL: f"kernel launches, all APIs ({', '.join(LAUNCH_APIS)})",
}
LABELS: dict[str, str] = {**METRICS, **LAUNCH_METRICS, **COPY_METRICS, **DERIVED_METRICS}
RUNTIME_METRICS = frozenset(m for m in METRICS if m.startswith("cuda")) | frozenset(LAUNCH_APIS)
MEMCPY_METRICS = ("memcpy_htod", "memcpy_dtoh", "memcpy_dtod")
NCCL_METRICS = ("nccl_allgather_ring_ll", "nccl_broadcast", "nccl_other")
# torch traces' CPU ops are "cpu:<op name>" rows (inclusive: the union of the op's calls).
CPU_PREFIX = "cpu:"

_MEMCPY_LABELS = {
    label: f"memcpy_{short}"
    for short, long in (
        ("htod", "host-to-device"),
        ("dtoh", "device-to-host"),
        ("dtod", "device-to-device"),
    )
    for label in (short, long, long.replace("-", ""))
}
# Copy-kind ids, used only when a file lacks ENUM_CUDA_MEMCPY_OPER (nsys 2022): CUPTI's
# CUpti_ActivityMemcpyKind, plus the unified-memory kinds 11-13 that nsys adds to the same column.
CUPTI_COPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    8: "DtoD",
    11: "Unified Host-to-Device",
    12: "Unified Device-to-Host",
    13: "Unified Device-to-Device",
}
# Labels of unified-memory kinds start with one of these ("Unified Host-to-Device" in the label
# column; the enum's name column, read when there is no label, spells it UVM_HTOD or UNIFIED_...).
_UNIFIED_PREFIXES = ("unified", "uvm")

# cudaLaunchKernel_v7000, cudaLaunchKernelExC_v11060, cudaMemcpyAsync_ptsz_v7000,
# cuLaunchKernel_ptsz: API version / per-thread-stream suffixes (nsys writes them, kineto not).
_RUNTIME_SUFFIX = re.compile(r"(?:_v\d+)$")
_PTS_SUFFIX = re.compile(r"_(?:ptsz|ptds)$")
_VERSION = re.compile(r"\d+(?:\.\d+)*")
# RING_LL must not match RING_LL128; older NCCL appends _Sum_int8_t etc.
_ALLGATHER_LL = re.compile(r"^nccl(?:Dev)?Kernel_AllGather_RING_LL(?:$|_)")
_BROADCAST = re.compile(r"^nccl(?:Dev)?Kernel_Broadcast(?:$|_)")
_NCCL = re.compile(r"^nccl(?:Dev)?Kernel_")
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first bytes of an nsys export (any SQLite file)
# RankProfile.span_ns keys both readers share (a Kineto trace's own is torch_trace.SPAN_TRACE).
SPAN_ACTIVITY = "CUDA activity span"
SPAN_SESSION = "ANALYSIS_DETAILS session"
# The wall as placed on the clock: the chosen span, widened to hold every record.
SPAN_WALL = "wall"


class ProfileError(Exception):
    """A profile file that cannot be read: one line naming file and problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@contextlib.contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[None]:
    """A file that fails to open or read, as one ProfileError line."""
    try:
        yield
    except FileNotFoundError as exc:
        raise ProfileError(path, "file not found") from exc
    except OSError as exc:
        raise ProfileError(path, f"cannot read file ({exc.strerror or exc})") from exc


@dataclass
class Row:
    """One aggregated raw name inside a profile."""

    metric: str
    raw_name: str
    calls: int
    total_s: float
    bytes: int | None = None


@dataclass
class RankProfile:
    """What a reader found in one file: aggregated rows plus the profiled wall time."""

    path: str
    source: str
    wall_s: float
    wall_from: str  # which span gave wall_s (and why that one), written beside every row
    rows: list[Row] = field(default_factory=list)
    rank_hint: int | None = None  # rank recorded inside the file (torch distributedInfo)
    # Every span the file offers, by name, so that the wall can be re-chosen once the run's
    # capture mode is known (nsys_sqlite.with_capture); those placed on the clock, [start, end)
    # in ns, in span_ns.
    spans: dict[str, float] = field(default_factory=dict)
    activity_s: float = float("nan")  # SPAN_ACTIVITY's length; NaN where not measured
    file_capture: str | None = None  # the capture mode the file records (META_DATA_CAPTURE)
    span_ns: dict[str, tuple[int, int]] = field(default_factory=dict)
    # One line for a format version newer than any tested: load prints it once.
    version_note: str = ""
    # CUDA records of an nsys export outside its session, by kind: with_capture widens the wall
    # to hold them and names them in wall_from, so that none is dropped.
    outside: dict[str, int] = field(default_factory=dict)
    # "CUDA", "HIP/ROCm" (a ROCm build's Kineto trace), or "" without GPU activity.
    device_kind: str = ""


class TidyRow(NamedTuple):
    """One row of the tidy table, COLUMNS then WALL_COLUMNS."""

    run: str
    rank: int
    source: str
    metric: str
    raw_name: str
    calls: int
    total_s: float
    bytes: int | None
    share: float
    wall_s: float = math.nan
    activity_s: float = math.nan
    wall_from: str = ""
    device_kind: str = ""


def profile_rows(run: str, rank: int, profile: RankProfile) -> list[TidyRow]:
    wall = float(profile.wall_s)
    return [
        TidyRow(
            run,
            int(rank),
            profile.source,
            r.metric,
            r.raw_name,
            int(r.calls),
            float(r.total_s),
            None if r.bytes is None or r.bytes != r.bytes else int(r.bytes),
            float(r.total_s) / wall if wall > 0 else math.nan,
            wall,
            float(profile.activity_s),
            profile.wall_from,
            profile.device_kind,
        )
        for r in profile.rows
    ]


def newer_version_note(kind: str, found: object, covered: Iterable[str]) -> str:
    """A one-line warning when `found`, the version a file records, is newer than every covered
    one ("" when absent, covered or older). The file is read all the same: both formats have only
    grown new columns and keys, and refusing a new release would block every user of it."""
    if found is None:
        return ""
    text = " ".join(str(found).split())  # one line whatever the file holds
    if not text:
        return ""
    newest = max(covered, key=_version_key)
    top, got = _version_key(newest), _version_key(text)
    if got is None:
        return f"{kind} version {text!r} not understood; read as {newest}, the newest tested"
    # 2025.3.1.90 is the 2025.3 release: compare only as many parts as the covered ones have.
    if got[: len(top)] <= top:
        return ""
    return f"{kind} version {text} is newer than the newest tested ({newest}); read as {newest}"


def _version_key(text: str) -> tuple[int, ...] | None:
    found = _VERSION.match(text)
    return tuple(int(p) for p in found.group(0).split(".")) if found else None


def runtime_metric(raw: str) -> str | None:
    """Normalised metric for a CUDA runtime or driver API name, or None if no metric reads it."""
    name = _PTS_SUFFIX.sub("", _RUNTIME_SUFFIX.sub("", raw.strip()))
    return name if name in RUNTIME_METRICS else None


def memcpy_metric(label: str) -> str | None:
    """Normalised metric for a copy-kind label: "HtoD", "Host-to-Device", "Memcpy HtoD (...)"."""
    text = label.strip().lower()
    for prefix in ("[cuda memcpy ", "cuda memcpy ", "memcpy "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.split(" (")[0].rstrip("]").strip()
    if text.startswith(_UNIFIED_PREFIXES):
        return MEMCPY_UNIFIED
    return _MEMCPY_LABELS.get(text)


def kernel_base_name(raw: str) -> str:
    """`void ncclDevKernel_X<...>(args)` -> `ncclDevKernel_X`: demangled names carry signatures."""
    name = raw.strip()
    if name.startswith("void "):
        name = name[5:]
    for stop in ("(", "<"):
        cut = name.find(stop)
        if cut > 0:
            name = name[:cut]
    return name.strip()


def nccl_metric(kernel_name: str) -> str | None:
    """Normalised metric for an NCCL kernel, or None for any non-NCCL kernel."""
    base = kernel_base_name(kernel_name)
    if _ALLGATHER_LL.match(base):
        return "nccl_allgather_ring_ll"
    if _BROADCAST.match(base):
        return "nccl_broadcast"
    if _NCCL.match(base):
        return "nccl_other"
    return None


class MetricTotal(NamedTuple):
    """A metric's raw names summed within one (run, rank, source)."""

    run: str
    rank: int
    source: str
    metric: str
    calls: int
    total_s: float
    bytes: int | None
    share: float


def sort_rows(rows: Iterable[TidyRow]) -> list[TidyRow]:
    """A table's rows in its order: by run, rank and source, then by time spent (most first)."""
    return sorted(rows, key=lambda r: (r.run, r.rank, r.source, -r.total_s, r.metric, r.raw_name))


def metric_totals(rows: Iterable[TidyRow]) -> list[MetricTotal]:
    """One per (run, rank, source, metric), sorted so (bytes None where no row has bytes), then
    a KERNEL_LAUNCH_ALL total (sums over LAUNCH_APIS; rows so named are left out) per (run, rank,
    source) with any launch."""
    groups: dict[tuple, list[TidyRow]] = {}
    for r in rows:
        if r.metric != KERNEL_LAUNCH_ALL:
            groups.setdefault((r.run, r.rank, r.source, r.metric), []).append(r)
    out, launches = [], {}
    for key in sorted(groups):
        sizes = [r.bytes for r in groups[key] if r.bytes is not None]
        out.append(_summed(key, groups[key], sum(sizes) if sizes else None))
        if key[3] in LAUNCH_APIS:
            launches.setdefault(key[:3], []).append(out[-1])
    return out + [_summed((*k, KERNEL_LAUNCH_ALL), g, None) for k, g in sorted(launches.items())]


def _summed(key: tuple, group: Sequence, nbytes: int | None) -> MetricTotal:
    calls, total_s = sum(r.calls for r in group), math.fsum(r.total_s for r in group)
    return MetricTotal(*key, calls, total_s, nbytes, math.fsum(r.share for r in group))


def read_metrics_rows(path: str | os.PathLike[str]) -> list[TidyRow]:
    """The rows of a metrics CSV; OSError as open() raises it, ValueError (one line) for a file
    that is not one. Missing WALL_COLUMNS (a table built by hand) read as unknown (NaN, "")."""
    with open(path, newline="", encoding="utf-8") as fh:
        lines = csv.reader(fh)
        header = next(lines, None)
        if not header:
            raise ValueError("no header line")
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise ValueError(f"no column {', '.join(missing)}")
        at = {c: header.index(c) for c in COLUMNS + WALL_COLUMNS if c in header}
        rows = []
        for n, cells in enumerate(lines, start=2):
            if not cells:
                continue
            if len(cells) > len(header):
                raise ValueError(f"line {n} has {len(cells)} fields, the header {len(header)}")
            cells += [""] * (len(header) - len(cells))
            try:
                rows.append(TidyRow(**{c: _PARSE[c](cells[i]) for c, i in at.items()}))
            except ValueError as exc:
                raise ValueError(f"line {n}: {exc}") from None
        return rows


def _whole(text: str) -> int:
    value = float(text)  # "3" and "3.0" alike; "" and "nan" refused below
    if not value.is_integer():
        raise ValueError(f"not a whole number: {text!r}")
    return int(value)


def _number(text: str) -> float:
    return float(text) if text else math.nan


_PARSE: dict[str, Callable[[str], object]] = {
    **dict.fromkeys(("run", "source", "metric", "raw_name", "wall_from", "device_kind"), str),
    **dict.fromkeys(("rank", "calls"), _whole),
    **dict.fromkeys(("total_s", "share", "wall_s", "activity_s"), _number),
    "bytes": lambda text: _whole(text) if text else None,
}


def write_rows_atomic(
    path: str | os.PathLike[str], columns: Sequence[str], rows: Iterable[Sequence]
) -> Path:
    """Write rows as CSV as pandas' to_csv would (floats as repr, NaN and None empty, "\\n" line
    ends) to a temp file in path's folder, then os.replace: never half a file."""
    dest = Path(path)
    import uuid  # here: only writing needs it, and it costs start-up time

    dest.parent.mkdir(parents=True, exist_ok=True)
    # Own unique name opened with "x" (not mkstemp) so the file gets the umask's usual mode.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", newline="") as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(columns)
            out.writerows([_cell(v) for v in row] for row in rows)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def write_tables(tables: Sequence[tuple[str, Sequence[str], list]]) -> bool:
    """Write (path, columns, rows) tables; False after one error line if one cannot be."""
    for dest, columns, rows in tables:
        try:
            write_rows_atomic(dest, columns, rows)
        except OSError as exc:
            print(f"error: {dest}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return False
    return True


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, float):  # numpy's float64 too, whose repr names its type
        return "" if math.isnan(value) else repr(float(value))
    return value
