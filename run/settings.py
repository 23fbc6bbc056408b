"""Every setting a user can give, declared once, and checked before any work.

A setting is an environment variable or a make variable (make hands its command line's variables
to every recipe's environment). The README's table of settings is `markdown_table()`. Every
program calls `check_all()` first (run/program.py), so a bad value is one line naming the variable
and what it accepts, exit status 2, before anything runs; code reads a setting with `value()` when
it needs it, never at import time, so importing a module never fails on a bad value. Unset and
empty (`make X=`) both mean the default.

    python -m run.settings --check      # nothing on stdout; a bad value: `error: ...`, exit 2
    python -m run.settings --markdown   # the README's table

Only the standard library and run.errors are imported here: the check costs nothing and cannot
fail to load. Checking PROFILE reads the matrix's scale names, with yaml, only when PROFILE is set.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from run.errors import UserError, exit_status

REPO = Path(__file__).resolve().parent.parent
URL = re.compile(r"https?://\S+$")
INDEX_URL = re.compile(r"(https?|file)://\S+$")


class SettingError(UserError):
    """A setting whose value is not one it accepts."""


class Setting(NamedTuple):
    name: str
    # whole, number, choice, scale, file, path, url, index, text or secret (see PARSERS)
    kind: str
    default: Any
    accepts: str  # the words of the table and of the error line: "<NAME> must be <accepts>"
    meaning: str
    low: int = 0  # whole: the least value accepted
    choices: tuple[str, ...] = ()  # choice: the values accepted
    shown: str = ""  # the default as the table says it, where `default` alone would mislead


SECONDS = "a number > 0 (seconds)"
# The profilers a run can name (its spec's `profiler`, run/*/spec.py), and PROFILER's choices.
PROFILERS = ("none", "auto", "torch", "nsys")
FOLDER = "a folder (made when missing)"
SETTINGS: tuple[Setting, ...] = (
    # what runs
    Setting("MATRIX_FILE", "file", REPO / "experiments" / "matrix.yaml", "an existing YAML file",
            "The experiment matrix every program reads (tests point it at a small one)."),
    Setting("PROFILE", "scale", None, "a scale of MATRIX_FILE (smoke, quick, paper)",
            "The scale of every run: smoke on a CPU in minutes, quick and paper on GPUs.",
            shown="paper where `nvidia-smi` sees a GPU, else smoke"),
    Setting("PROFILER", "choice", None, "one of auto, torch, nsys, none",
            "Overrides the profiler of every run: auto = nsys when on the PATH, else "
            "torch.profiler; part of each run's name.",
            choices=(*PROFILERS[1:], *PROFILERS[:1]), shown="each experiment's own"),
    Setting("REPEATS", "whole", 1, "a whole number >= 1",
            "Each run spec runs n times with seeds seed, seed+1, ...; tables show medians "
            "and min-max.", low=1),
    Setting("NUMA", "choice", "auto", "one of auto, bind, off",
            "Binding of each rank to its GPU's NUMA node: auto = bind when numactl is installed "
            "and the machine has several nodes.", choices=("auto", "bind", "off")),
    Setting("CPU_THREADS_PER_RANK", "whole", 1, "a whole number >= 1",
            "Compute threads of each CPU (gloo) rank, which stands in for one GPU.", low=1),
    # how a sweep runs them
    Setting("RUN_TIMEOUT_S", "whole", 0, "a whole number >= 0 (seconds; 0 = no limit)",
            "A run still going after this long is stopped and recorded as failed "
            "(`make gpu-check`: 1800 per check when unset).", low=0),
    Setting("HEARTBEAT_S", "number", 60.0, SECONDS,
            "A sweep prints the running run's last log line at least this often."),
    Setting("LOCK_STALE_S", "number", 600.0, SECONDS,
            "A run's lock untouched this long is taken for dead and its run for free (its "
            "holder touches it every quarter of this)."),
    Setting("LOCK_POLL_S", "number", 5.0, SECONDS,
            "How often a sweep looks again at a run another sweep holds."),
    # where things are
    Setting("RESULTS_DIR", "path", Path("results"), FOLDER,
            "Where runs, sweeps and tables go (`<RESULTS_DIR>/<scale>/`)."),
    Setting("REPORT_RESULTS", "text", None, "results folders, separated by spaces",
            "The results folders `make report` sets side by side, one column per machine.",
            shown="RESULTS_DIR"),
    Setting("LLM_DATA_ROOT", "path", REPO / "data" / "llm", FOLDER,
            "Generated LLM data sets and tokenizers; what `make assets` fetches goes under it."),
    Setting("LLAMA3_DIR", "path", None, "a folder",
            "The Llama3-8B-Instruct folder (Meta's original/ or Hugging Face safetensors, with "
            "tokenizer.model); unset, 8B runs use random weights. `make assets` fetches into it.",
            shown="`data/llm/Meta-Llama-3-8B-Instruct` when there (make), else unset"),
    Setting("LLAMA3_TOKENIZER", "path", None, "a tokenizer.model file",
            "Meta's Llama3 tokenizer for 8B runs without LLAMA3_DIR; unset, a byte tokenizer "
            "stands in."),
    Setting("LLM_DATASETS_DIR", "path", None, "a folder",
            "The LLM parent data sets as `<name>.jsonl`; unset, runs use the generated ones. "
            "`make assets` fetches into it.",
            shown="`data/llm/datasets` when there (make), else unset"),
    Setting("MNIST_DIR", "path", Path("data/mnist"), FOLDER,
            "Real MNIST (`MNIST/raw/*-ubyte`), which quick and paper train on; `make assets` "
            "and `make data-mnist` fetch into it."),
    Setting("DIGITS_DIR", "path", Path("data/digits"), FOLDER,
            "The generated digits in MNIST's format, which smoke trains on."),
    Setting("SCENARIO_B_DIR", "path", Path("data/scenario_b"), FOLDER,
            "Scenario B's pre-resized image sets (V8-V11), made by the runs that need them."),
    # fetching assets
    Setting("HF_TOKEN", "secret", None, "a Hugging Face token",
            "`make assets`: a token of an account that accepted the Llama 3 licence; never "
            "printed.", shown="the token `hf auth login` cached"),
    Setting("HF_ENDPOINT", "url", None, "an http(s) URL",
            "`make assets`: a Hugging Face mirror to fetch from.",
            shown="`https://huggingface.co`"),
    # SLURM and containers
    Setting("NODES", "whole", 1, "a whole number >= 1",
            "`make slurm`: nodes that share the runs (a job array), then one job for the "
            "report.", low=1),
    Setting("SIF", "path", Path("artifact.sif"), "an Apptainer image file",
            "The image SLURM jobs run in; the default missing, they use the clone's .venv; one "
            "named explicitly must exist (`make slurm` refuses it otherwise)."),
    Setting("SBATCH_OPTS", "text", None, "sbatch options, separated by spaces",
            "`make slurm`: given to every sbatch call before the script, over its #SBATCH lines "
            "(--partition, --account, --qos, --time)."),
    Setting("BIND", "text", None, "folders, separated by spaces",
            "`make slurm`: more folders bound into the image (beside the clone, LLAMA3_DIR, "
            "MNIST_DIR and RESULTS_DIR)."),
    Setting("TORCH_INDEX", "index", None, "a wheel index URL (http, https, file) or folder",
            "The torch build the venv and the images install, e.g. "
            "`https://download.pytorch.org/whl/cu126` for a driver older than 580.",
            shown="container/pins.env's (empty: PyPI's, CUDA 13)"),
    Setting("CONTAINER_ENGINE", "text", None, "a command",
            "`make container`: the engine that builds the OCI image.",
            shown="podman, else docker"),
    Setting("LOCAL_WHEELS", "path", Path("/opt/wheels"), "a folder",
            "`make container-local`: the folder holding the CPU torch wheel."),
    Setting("HOST_CA", "path", Path("/etc/ssl/certs/ca-certificates.crt"), "a file",
            "`make container-local`: the CA bundle pip uses in the build."),
    # benchmarks
    Setting("HTA_PYTHON", "text", None, "a command",
            "`make bench-analysis`: the Python of a separate venv with HolisticTraceAnalysis, to "
            "time the reader beside HTA."),
    Setting("HTA_TRACE", "path", None, "a file",
            "`make bench-analysis`: HTA's own test trace, the one both read."),
    # make itself
    Setting("PYTHON", "text", "python3", "a command",
            "The Python that makes the venv."),
    Setting("VENV", "path", Path(".venv"), FOLDER,
            "Where the venv is made (pinned versions, requirements.txt)."),
    Setting("PY", "text", None, "a command",
            "`make gpu-check PY=python3`: a Python that already has torch; no venv is made.",
            shown="`.venv/bin/python`"),
    Setting("CHECK_TARGETS", "text", None, "make targets, separated by spaces",
            "`make check-verdicts`: the targets swept twice.",
            shown="the 8 targets whose claims are timings"),
    Setting("CHECK_DIR", "path", Path("results/check-verdicts"), FOLDER,
            "`make check-verdicts`: where its two sweeps go."),
)  # fmt: skip
BY_NAME = {s.name: s for s in SETTINGS}


def _refuse(s: Setting, raw: str, accepts: str = "") -> SettingError:
    got = "a value not shown" if s.kind == "secret" else repr(raw)
    return SettingError(f"{s.name} must be {accepts or s.accepts}, got {got}")


def _accept(
    parse: Callable[[str], Any], ok: Callable[[Setting, Any], bool]
) -> Callable[[Setting, str], Any]:
    def parser(s: Setting, raw: str) -> Any:
        try:
            got = parse(raw)
        except ValueError:
            raise _refuse(s, raw) from None
        if not ok(s, got):
            raise _refuse(s, raw)
        return got

    return parser


def _scale(s: Setting, raw: str) -> str:
    known = matrix_scales()
    if raw not in known:
        raise _refuse(s, raw, f"a scale of {value('MATRIX_FILE')}: {', '.join(known)}")
    return raw


def _is_index(s: Setting, raw: str) -> bool:
    # pip takes a local folder laid out as an index too; a bare `cu126` is the usual slip
    return bool(INDEX_URL.match(raw) or Path(raw).expanduser().is_dir())


PARSERS: dict[str, Callable[[Setting, str], Any]] = {
    "whole": _accept(int, lambda s, n: n >= s.low),
    "number": _accept(float, lambda s, x: math.isfinite(x) and x > 0),
    "choice": _accept(str, lambda s, raw: raw in s.choices),
    "scale": _scale,
    "file": _accept(lambda raw: Path(raw).expanduser(), lambda s, path: path.is_file()),
    "path": lambda s, raw: Path(raw),  # callers expand ~ where they always did
    "url": _accept(str, lambda s, raw: bool(URL.match(raw))),
    "index": _accept(str, _is_index),
    "text": lambda s, raw: raw,
    "secret": lambda s, raw: raw,
}


def matrix_scales() -> list[str]:
    """The scale names of MATRIX_FILE, with yaml (not run.sweep.matrix, which reads its settings
    here); without PyYAML (make checks the settings before the venv exists) line by line."""
    path = value("MATRIX_FILE")
    try:
        from run import yamlfile
    except ImportError:
        return _scale_keys(path)
    data = yamlfile.load(path, SettingError)
    scales = data.get("scales") if isinstance(data, dict) else None
    if not isinstance(scales, dict) or not scales:
        raise SettingError(f"{path}: no scales")
    return [str(p) for p in scales]


def _scale_keys(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SettingError(f"{path}: {exc.strerror}") from None
    keys, inside = [], False
    for line in lines:
        if line[:1] not in ("", " ", "#"):
            inside = line.startswith("scales:")
        elif inside and (m := re.match(r"  ([A-Za-z0-9_-]+):", line)):
            keys.append(m.group(1))
    if not keys:
        raise SettingError(f"{path}: no scales")
    return keys


def value(name: str) -> Any:
    """The typed value of one setting (the default when unset or empty); SettingError when bad."""
    s = BY_NAME[name]
    raw = os.environ.get(name, "").strip()
    if not raw:
        return s.default
    return PARSERS[s.kind](s, raw)


def path(name: str) -> Path | None:
    """A path or file setting as given, the file system not asked: for readers that must not fail
    (store.results_root, matrix.matrix_file), whose programs checked the settings first."""
    s = BY_NAME[name]
    if s.kind not in ("path", "file"):
        raise KeyError(f"{name} is not a path setting")
    raw = os.environ.get(name, "").strip()
    if not raw:
        return s.default
    return Path(raw).expanduser() if s.kind == "file" else Path(raw)


def given(name: str) -> bool:
    """Whether a setting is set (not empty): where its default means something else."""
    return bool(os.environ.get(BY_NAME[name].name, "").strip())


def check_all(names: Iterable[str] | None = None) -> int:
    """Check every setting (or those named); SettingError on the first bad one. Returns how many."""
    chosen = SETTINGS if names is None else tuple(BY_NAME[n] for n in names)
    for s in chosen:
        value(s.name)
    return len(chosen)


# Given by the launcher (torchrun), the scheduler (SLURM) or the image, not by the user: no entry
# of the table and nothing to check, but read here too, at call time, so that this module is the
# one reader of the environment.
IMAGE_SHA = "ARTIFACT_GIT_SHA"  # the commit an image was built from (Containerfile, apptainer.def)
HOST_GIVEN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE",
              "SLURM_JOB_ID", IMAGE_SHA)  # fmt: skip


def given_by_host(name: str) -> str | None:
    if name not in HOST_GIVEN:
        raise KeyError(f"{name} is not given by the host")
    return os.environ.get(name)


# This process's rank, its rank on the node (its GPU) and the ranks of a torchrun launch (0, 0, 1
# outside one).
def rank() -> int:
    return int(os.environ.get("RANK") or 0)


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK") or 0)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE") or 1)


def shown_default(s: Setting) -> str:
    if s.shown:
        return s.shown
    if s.default is None:
        return "unset"
    default = s.default
    if isinstance(default, Path) and default.is_relative_to(REPO):
        default = default.relative_to(REPO)
    if isinstance(default, float):
        default = f"{default:g}"
    return f"`{default}`"


def markdown_table() -> str:
    """The README's table of settings, one row per setting in declaration order."""
    rows = ["| setting | accepts | default | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        cells = (s.accepts, shown_default(s), s.meaning)
        rows.append(f"| `{s.name}` | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """run/program.py's check and one line by hand (program imports this module)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        check_all()
    except SettingError as exc:
        return exit_status(exc)
    if argv == ["--check"]:  # make runs this on every call: argparse (and re's load) is its cost
        return 0
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m run.settings", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="check every setting that is set")
    what.add_argument("--markdown", action="store_true", help="print the README's table")
    if ap.parse_args(argv).markdown:
        print(markdown_table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
