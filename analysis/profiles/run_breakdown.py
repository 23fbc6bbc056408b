"""Beyond the paper: each profiled run's time breakdown (breakdown.py), for an artifact's table.

Read from RUN/profile_breakdown.csv, which the sweep writes beside the profile's metrics. Per run,
the device quantities are the mean over its (rank, device) rows of the share of each row's window,
and host_blocked the mean over its ranks. A run whose profile saw no device activity (a CPU run)
has no device rows, and its GPU columns stay empty rather than 0, which would read as an idle GPU.
"""

from __future__ import annotations

import pandas as pd

from run import store
from run.node import profiling

from .breakdown import HOST

DEVICE_QUANTITIES = ("busy", "idle", "compute", "comm", "comm_not_overlapped")
COLUMNS = ["run", "ranks", "devices", "window_s",
           *(f"{q}_pct" for q in DEVICE_QUANTITIES), "host_blocked_pct"]  # fmt: skip
LABEL = "Beyond the paper"


def summarise(run: str, rows: pd.DataFrame) -> dict:
    dev = rows[rows["device"].astype(str) != HOST]
    windows = dev[dev["quantity"] == "window"]
    windows = windows[windows["seconds"] > 0]
    keys = windows[["rank", "device"]].astype(str).agg("/".join, axis=1)
    dev = dev[dev[["rank", "device"]].astype(str).agg("/".join, axis=1).isin(set(keys))]
    out: dict = {"run": run, "ranks": int(rows["rank"].nunique()), "devices": len(keys),
                 "window_s": float(windows["seconds"].mean()) if len(windows) else None}  # fmt: skip
    for q in DEVICE_QUANTITIES:
        share = dev.loc[dev["quantity"] == q, "share_of_window"]
        out[f"{q}_pct"] = 100 * float(share.mean()) if len(share) else None
    host = rows[(rows["device"].astype(str) == HOST) & (rows["quantity"] == "host_blocked")]
    share = pd.to_numeric(host["share_of_window"], errors="coerce").dropna()
    out["host_blocked_pct"] = 100 * float(share.mean()) if len(share) else None
    return out


def table(runs: pd.DataFrame, scale: str | None) -> pd.DataFrame:
    """COLUMNS for every ok run that left a breakdown (empty where no scale names the results)."""
    rows = []
    for _, r in runs.iterrows() if scale else ():
        if r.get("status") != "ok":
            continue
        path = store.run_dir(scale, r["run"]) / profiling.PROFILE_BREAKDOWN
        one = pd.read_csv(path) if path.is_file() else None
        if one is not None and len(one):
            rows.append(summarise(r["run"], one))
    return pd.DataFrame(rows, columns=COLUMNS)


def note(t: pd.DataFrame, what: str) -> str:
    if t.empty:
        return f"{LABEL}: no profiled run left a time breakdown ({what})."
    measured = t[t["devices"] > 0]
    if measured.empty:
        return (f"{LABEL}: the time breakdown of {len(t)} profiled run(s) has no device rows: the "
                f"profiles recorded no kernel, copy or memset (a CPU run), so GPU busy, idle and "
                f"communication are not measured ({what}).")  # fmt: skip
    parts = []
    for col, name in (("busy_pct", "GPU busy"), ("comm_not_overlapped_pct", "communication not "
                      "overlapped"), ("host_blocked_pct", "host blocked in CUDA calls")):  # fmt: skip
        v = measured[col].dropna()
        if len(v):
            parts.append(f"{name} {v.min():.1f}-{v.max():.1f}%")
    return (f"{LABEL}: time breakdown of {len(measured)} profiled run(s) by interval union "
            f"(share of each rank's window, mean over ranks and devices): {', '.join(parts)} "
            f"({what}).")  # fmt: skip
