"""Shared by the figure scripts: read an artifact's CSV and JSON, save PNG and PDF."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from run import store  # noqa: E402

OUT_DIR = Path(__file__).resolve().parents[1] / "out"


def figures_dir(profile: str) -> Path:
    """Figures of one profile: report/out/<profile>/figures (a quick run never shows in smoke)."""
    return OUT_DIR / profile / "figures"


def load(target: str, profile: str) -> tuple[pd.DataFrame, dict]:
    csv = store.tables_dir(profile) / f"{target}.csv"
    if not csv.is_file():
        raise FileNotFoundError(f"{csv} missing: run `make {target} PROFILE={profile}` first")
    return pd.read_csv(csv), json.loads(csv.with_suffix(".json").read_text())


def save(fig: plt.Figure, target: str, profile: str) -> Path:
    figures_dir(profile).mkdir(parents=True, exist_ok=True)
    png = figures_dir(profile) / f"{target}.png"
    fig.savefig(png, dpi=130, bbox_inches="tight")
    fig.savefig(png.with_suffix(".pdf"), bbox_inches="tight")
    plt.close(fig)
    return png


def extra_table(target: str, profile: str, name: str) -> pd.DataFrame:
    """A side table the analysis wrote beside the target's CSV (<target>-<name>.csv)."""
    return pd.read_csv(store.tables_dir(profile) / f"{target}-{name}.csv")


def time_bars(ax: plt.Axes, df: pd.DataFrame, by: str) -> None:
    """Total time as grouped bars: one group per GPU count, one bar per value of `by` (V8, V10,
    V11); medians over repeats."""
    df = df[df["status"] == "ok"]
    med = df.groupby([by, "gpus"])["total_time_s"].median().unstack(by)
    width = 0.8 / max(len(med.columns), 1)
    for i, col in enumerate(med.columns):
        ax.bar([g + (i - (len(med.columns) - 1) / 2) * width for g in med.index], med[col],
               width=width, label=str(col))  # fmt: skip
    ax.set(xlabel="GPUs (ranks)", ylabel="total time [s]", xticks=list(med.index))
    ax.legend()


def subtitle(meta: dict) -> str:
    return f"{meta['source']} | measured, profile '{meta['profile']}'"


def main_for(draw: Callable[[pd.DataFrame, dict], plt.Figure], target: str) -> None:
    ap = argparse.ArgumentParser(description=f"Draw {target} from its CSV.")
    ap.add_argument("--profile", required=True)
    args = ap.parse_args()
    try:
        df, meta = load(target, args.profile)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {save(draw(df, meta), target, args.profile)}")
