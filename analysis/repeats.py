"""Repeats of a run (REPEATS=n: seeds seed..seed+n-1, each a run of its own) collapsed to one
row per cell: each value's median over the repeats with its min and max (`v`, `v_min`, `v_max`),
how many finished (`repeats`) and which runs they were.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

OK = "ok"


def _hashable(v: Any) -> Any:
    """A dict key: NaN/None as one marker (NaN != NaN would split a group), lists and dicts as
    tuples."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ("<missing>",)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def collapse(df: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    """One row per group of runs that differ only in seed and run (the repeats of one cell).

    Keys are every other column but status and repeats, groups in order of first appearance;
    NaN (or non-numeric) values are left out. With a status column, `repeats` counts the ok runs,
    and a repeat that did not end ok is left out of the statistics when its group has one that
    did (an OOM run's partial numbers must not pull a median); a group without any ok run keeps
    its runs' values and statuses ("/"). `run` lists the group's runs joined by ", ".
    """
    missing = [v for v in values if v not in df.columns]
    if missing:
        raise ValueError(f"collapse: the table has no column(s) {', '.join(missing)}")
    stats = {f"{v}{s}" for v in values for s in ("", "_min", "_max")}
    # status is no key: a failed repeat must not split its cell from the repeats that finished
    keys = [c for c in df.columns if c not in {"seed", "run", "status", "repeats", *stats}]
    has_status = "status" in df.columns
    has_run = "run" in df.columns
    out_cols = [
        *keys,
        *(["status"] if has_status else []),
        *(["run"] if has_run else []),
        *[c for v in values for c in (v, f"{v}_min", f"{v}_max")],
        "repeats",
    ]
    if df.empty:
        return pd.DataFrame(columns=out_cols)
    # Values as floats once, so that None, strings and NaN all read as "not measured".
    nums = {v: pd.to_numeric(df[v], errors="coerce").astype(float) for v in values}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for pos, row in enumerate(df[keys].itertuples(index=False, name=None)):
        groups.setdefault(tuple(_hashable(x) for x in row), []).append(pos)
    rows = []
    for members in groups.values():
        first = df.iloc[members[0]]
        out: dict[str, Any] = {k: first[k] for k in keys}
        used = members
        if has_status:
            statuses = [df["status"].iloc[i] for i in members]
            ok = [i for i, s in zip(members, statuses, strict=True) if s == OK]
            if ok:
                used, out["status"] = ok, OK
            else:
                out["status"] = "/".join(sorted({str(s) for s in statuses if pd.notna(s)})) or None
            n = len(ok)
        else:
            n = len(members)
        if has_run:
            out["run"] = ", ".join(str(df["run"].iloc[i]) for i in members)
        for v in values:
            vals = nums[v].iloc[used].dropna()
            empty = vals.empty
            out[v] = math.nan if empty else float(vals.median())
            out[f"{v}_min"] = math.nan if empty else float(vals.min())
            out[f"{v}_max"] = math.nan if empty else float(vals.max())
        out["repeats"] = n
        rows.append(out)
    result = pd.DataFrame(rows, columns=out_cols)
    result["repeats"] = result["repeats"].astype(int)
    return result
