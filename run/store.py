"""The run store: one folder per run, named after its setup, complete or absent.

Every path is a constant or a function here, so that `analysis/` imports them. Beside the files
the README lists (spec.json, provenance.json, log.txt, epochs.jsonl or steps.jsonl, summary.json
written last), an LLM run holds torchtune_config.yaml (the exact config the recipe ran with) and
torchtune/ (its output_dir, no checkpoints), and a vision run timeline.rank<R>.jsonl: rank R's
intervals, one per line, {"phase": train_step | eval_step | epoch | eval, "epoch": 1-based,
"step": int or null, "t0": unix s, "t1": unix s} (the steps stand in for the GPU's busy intervals,
V9; epoch and eval locate the pauses). Beside runs/: sweeps/<EXP>.json (what a sweep of one
experiment found, skipped cells included) and tables/<target>.csv.

A run is written into runs/.staging/<run-name>@<attempt>/ and renamed into runs/ in one
`os.replace`, so a killed sweep leaves nothing half-written where the analysis looks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from run import settings

# The checkout: run/ sits in it, so every module finds configs, experiments and reference here.
REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = REPO / "reference" / "paper"  # the paper's published numbers (read-only)
REPORT_OUT_DIR = REPO / "report" / "out"  # the report of the checkout's own results/

SPEC = "spec.json"
PROVENANCE = "provenance.json"
SUMMARY = "summary.json"
EPOCHS = "epochs.jsonl"
STEPS = "steps.jsonl"
LOG = "log.txt"
TORCHTUNE_CONFIG = "torchtune_config.yaml"
# Profiler outputs (torch traces, nsys reports) are named in run/node/profiling.py.
TORCHTUNE_OUTPUT_DIR = "torchtune"
TIMELINE = "timeline.rank{rank}.jsonl"
STAGING = ".staging"

# Run outcomes. "unsupported" marks cells the paper itself could not run (e.g. QLoRA distributed).
STATUSES = ("ok", "failed", "oom", "unsupported")
# summary.json's memory_kind: where a run's peak memory was read. Only the first two are VRAM.
GPU_ACTIVE = "gpu_active"  # torch.cuda's active bytes (the LLM recipes' memory stats)
GPU_MAX_ALLOCATED = "gpu_max_allocated"  # torch.cuda.max_memory_allocated (the vision loop)
HOST_PEAK_RSS = "host_peak_rss"  # rank 0's peak resident set size: a CPU run's host memory
GPU_MEMORY = frozenset({GPU_ACTIVE, GPU_MAX_ALLOCATED})


def results_root() -> Path:
    """RESULTS_DIR, read when asked, never at import: tests and `make report` point it elsewhere."""
    return settings.path("RESULTS_DIR")


def scale_dir(scale: str, root: Path | None = None) -> Path:
    return (root or results_root()) / scale


def report_dir(scale: str) -> Path:
    """report/out/<scale> for the checkout's own results/, else <RESULTS_DIR>/<scale>/report:
    results elsewhere never overwrite this checkout's report (the Makefile's REPORT_OUT too)."""
    if os.path.abspath(results_root()) == os.path.abspath(REPO / "results"):
        return REPORT_OUT_DIR / scale
    return scale_dir(scale) / "report"


def figures_dir(scale: str) -> Path:
    return report_dir(scale) / "figures"


def runs_dir(scale: str, root: Path | None = None) -> Path:
    return scale_dir(scale, root) / "runs"


def run_dir(scale: str, name: str, root: Path | None = None) -> Path:
    return runs_dir(scale, root) / name


def staging_dir(scale: str, name: str, root: Path | None = None) -> Path:
    return runs_dir(scale, root) / STAGING / name


def timeline_file(run: Path, rank: int) -> Path:
    return run / TIMELINE.format(rank=rank)


def tables_dir(scale: str, root: Path | None = None) -> Path:
    return scale_dir(scale, root) / "tables"


def sweeps_dir(scale: str, root: Path | None = None) -> Path:
    return scale_dir(scale, root) / "sweeps"


def sweep_file(scale: str, exp_id: str) -> Path:
    """The sweep's record of one experiment (sweeps/<EXP>.json)."""
    return sweeps_dir(scale) / f"{exp_id}.json"


def is_finished(scale: str, name: str, root: Path | None = None) -> bool:
    return (run_dir(scale, name, root) / SUMMARY).is_file()


# mkstemp creates files 0600; run files follow the umask like any other file, so that others
# sharing a results folder (a group on a cluster) can read them.
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


def named(exc: BaseException, path: Path) -> BaseException:
    """An OSError naming the file: a write that fails on a full disk names none."""
    if isinstance(exc, OSError) and not exc.filename and exc.errno:
        return OSError(exc.errno, exc.strerror, str(path))
    return exc


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_file(path) as fh:
        fh.write(text)


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A file that readers see either old or whole and new: written under a temporary name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        raise named(exc, path) from None


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(obj, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    with open(path) as fh:
        return json.load(fh)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def start_staging(scale: str, name: str, attempt: str, root: Path | None = None) -> Path:
    """A staging folder of this attempt's own: a process an earlier attempt left behind cannot mix
    into this run."""
    stage = staging_dir(scale, name, root).with_name(f"{name}@{attempt}")
    stage.mkdir(parents=True)
    return stage


def stagings(scale: str, name: str, root: Path | None = None) -> list[Path]:
    """The staging folders attempts of a run left, newest first."""
    base = staging_dir(scale, name, root)
    found = [p for p in base.parent.glob(f"{name}@*") if p.name.split("@", 1)[0] == name]
    found += [base] if base.exists() else []
    return sorted(found, key=lambda p: p.stat().st_mtime if p.exists() else 0.0, reverse=True)


def discard_staging(scale: str, name: str, root: Path | None = None) -> list[Path]:
    """Remove what earlier attempts left in staging (the caller holds the lock and stopped them)."""
    gone = stagings(scale, name, root)
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone


def publish(stage: Path, scale: str, name: str, root: Path | None = None) -> Path:
    """Move a staged run (which must hold its summary) into place in one rename."""
    if not (stage / SUMMARY).is_file():
        raise RuntimeError(f"refusing to publish {stage}: no {SUMMARY}")
    final = run_dir(scale, name, root)
    if final.exists():
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(stage, final)
    return final


def read_summary(run: Path) -> dict[str, Any] | None:
    """A run folder's summary (None: not finished), the one way anything reads a run's outcome.
    An unreadable summary.json (truncated, not an object, no status) or spec.json reads as a failed
    run, `unreadable: True`, whose `error` names the file and why: the next sweep runs it again,
    and a report leaves it out instead of stopping."""
    path = run / SUMMARY
    if not path.is_file():
        return None
    got: dict[str, Any] = {}
    for file in (SUMMARY, SPEC):
        try:
            got[file] = read_json(run / file)
        except (OSError, ValueError) as exc:
            why = f"{file}: {exc.__class__.__name__}: {exc}"
            break
    else:
        summary, spec = got[SUMMARY], got[SPEC]
        if not isinstance(summary, dict) or summary.get("status") not in STATUSES:
            why = f"{SUMMARY} holds no run status"
        elif not isinstance(spec, dict):
            why = f"{SPEC} is not a JSON object"
        else:
            return summary
    error = f"unreadable run {run.name} ({why})"
    return {"status": "failed", "unreadable": True, "why": why, "error": error}


def is_unreadable(summary: dict[str, Any] | None) -> bool:
    return bool(summary and summary.get("unreadable"))
