"""L8 (J Fig.16): peak memory by template, method and GPU count.

On GPUs: torchtune's peak active memory per GPU in the last step (rank 0, `log_peak_memory_stats`,
reset after each step), as the paper read its logs; the maximum over all steps (often the first,
before the allocator settles) beside. `peak_memory_all_gpus_gib` = per-GPU peak x GPUs: what
L8a's "doubles, then falls in proportion to the GPUs" keeps constant. Without a GPU: rank 0's
peak RSS (`memory_kind` host_peak_rss), so the VRAM claims are not measured (gates). Unsupported
and out-of-memory cells are rows with their status. No paper numbers, no self-check.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from analysis import common as c
from analysis import draw
from analysis.artifacts import fig_templates as ft
from analysis.driver import Artifact
from run import store
from run.llm.spec import METHODS

KEYS = ["method", "template"]
GIB = 1024**3
COLUMNS = ["template", "dataset", "method", "method_label", "gpus", "peak_memory_gib",
           "peak_memory_max_gib", "peak_memory_all_gpus_gib", "memory_kind", "status", "reason",
           "run"]  # fmt: skip
# gates(): why the claims cannot be judged without a GPU (claims.yaml `gates:`)
NOT_VRAM = (
    "no GPU: the numbers are the peak host RSS of rank 0 (the whole process: Python, torch and "
    "the tiny model), not VRAM"
)
NO_OOM = (
    "no GPU memory to run out of; QAT on 1 device is unsupported (torchtune 0.6.1 has no "
    "single-device QAT recipe), not out of memory"
)


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    cols = ("peak_memory_bytes", "peak_memory_max_bytes", "memory_kind", "error")
    df = ft.llm_cells(runs, cols, METHODS)
    for peak in ("peak_memory", "peak_memory_max"):
        df[f"{peak}_gib"] = [
            b / GIB if s == "ok" and pd.notna(b) else None
            for b, s in zip(df[f"{peak}_bytes"], df["status"], strict=True)
        ]
    df["peak_memory_all_gpus_gib"] = pd.to_numeric(df["peak_memory_gib"]) * df["gpus"]
    df["reason"] = c.reasons(df)
    df = df.sort_values(["_m", "_t", "gpus"])
    return df[COLUMNS]


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Method x template as rows (the paper's panels, then bar groups), the peak per GPU for
    each GPU count as columns."""
    return ft.by_gpus(t, KEYS, "peak_memory_gib", "GiB", METHODS)


def title(runs: pd.DataFrame, t: pd.DataFrame) -> str:
    """VRAM only where the peaks were read from the GPU allocator (the table's memory_kind)."""
    kinds = set(t["memory_kind"].dropna()) if len(t) else set()
    if kinds & store.GPU_MEMORY:
        return "Peak VRAM per GPU by template, method and GPUs"
    return "Peak host memory (RSS of rank 0, no GPU: not VRAM) by template, method and ranks"


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    """`gpu` (L8a-c, L8e): the peaks are VRAM; `gpu_oom` (L8d): runs can run out of GPU memory."""
    kinds = set(t["memory_kind"].dropna()) if len(t) else set()
    if c.on_gpu(runs) and (not kinds or kinds & store.GPU_MEMORY):
        return {}
    return {"gpu": NOT_VRAM, "gpu_oom": NO_OOM}


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = c.llm_cpu_notes(runs)
    if not c.on_gpu(runs):
        out.append(
            "CPU run: peak_memory_gib is the peak resident set size of rank 0's process (host "
            "memory), labelled host_peak_rss; it is not VRAM and the paper has no such number."
        )
    return out


def figure(df: pd.DataFrame, meta: dict) -> plt.Figure:
    # from the table's memory_kind: VRAM only where the peaks were read from the GPU allocator
    host = not df["memory_kind"].dropna().isin(store.GPU_MEMORY).any()
    ylabel = "peak host RSS, rank 0 [GiB]" if host else "peak VRAM per GPU [GiB]"
    gpus = [draw.gpus_label(g) for g in sorted(df["gpus"].unique())]  # a failed count: n/a bars
    fig, axes = draw.panel_bars(df, "method_label", ft.METHOD_NAMES, "template", ft.TEMPLATES,
                                "gpus", gpus, "peak_memory_gib", "max", draw.gpus_label)  # fmt: skip
    for ax, m in zip(axes, ft.METHOD_NAMES, strict=True):
        ax.set_xticks(ax.get_xticks(), [t.replace(" ", "\n") for t in ft.TEMPLATES], fontsize=8)
        ax.set_title(m, fontsize=9)
    axes[0].set_ylabel(ylabel)
    draw.legend(axes[0], title="GPUs (ranks)", fig=fig)
    what = "Peak host memory, RSS of rank 0 (no GPU: not VRAM)," if host else "Peak VRAM per GPU"
    fig.suptitle(f"{what} by template, method and GPUs\n{draw.subtitle(meta)}", fontsize=10)
    fig.tight_layout()
    return fig


ARTIFACT = Artifact(
    table=table, compact=compact, keys=KEYS, notes=notes, gates=gates, title=title, figure=figure
)
