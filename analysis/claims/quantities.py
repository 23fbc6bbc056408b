"""The quantities a claim reads from an artifact's tidy table, and the numbers written for people.

A quantity is `value` (a column) of the rows matching `where`, one number per group of `by`
columns; repeats of a run (rows that differ only in seed) give the median and their min-max.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.claims.spec import OPS


@dataclass
class Q:
    """One quantity: per group (`keys`), the median over repeats with min, max and count."""

    keys: list[str]
    frame: pd.DataFrame  # keys + med, lo, hi, n
    unmeasured: list[str] = field(default_factory=list)  # why rows were not measured
    missing: str = ""  # the filter that left no rows, with the values the table has
    gpus: set[float] = field(default_factory=set)  # GPU counts of the rows read (coverage)
    runs: set[str] = field(default_factory=set)  # the runs behind the rows read

    def empty(self) -> bool:
        return self.frame.empty


def _resolve(t: pd.DataFrame, col: str, v: Any) -> list[Any]:
    vals = v if isinstance(v, list) else [v]
    out = []
    for x in vals:
        if x in ("max", "min") and col in t and t[col].dtype != object:
            present = t[col].dropna()
            out.append(present.max() if x == "max" else present.min())
        elif isinstance(x, str) and x[:1] in "<>" and col in t:
            op = x[:2] if x[1:2] == "=" else x[:1]
            out.extend(v2 for v2 in t[col].dropna().unique() if OPS[op](v2, float(x[len(op) :])))
        else:
            out.append(x)
    return out


def rows_where(t: pd.DataFrame, where: dict[str, Any] | None) -> tuple[pd.DataFrame, str]:
    """Rows of `t` matching every filter, or none and the filter that left none (for people)."""
    rows = t
    for col, v in (where or {}).items():
        if col not in rows:
            return t.iloc[0:0], f"the table has no column {col}"
        kept = rows[rows[col].isin(_resolve(t, col, v))]
        if kept.empty:
            have = ", ".join(str(x) for x in sorted(rows[col].dropna().unique().tolist()))
            shown = ", ".join(map(str, v)) if isinstance(v, list) else v
            return kept, f"no runs with {col} {shown} (ran: {have or 'none'})"
        rows = kept
    return rows, ""


def select(t: pd.DataFrame, spec: dict[str, Any]) -> Q:
    """Rows of `t` matching `spec['where']`, reduced to one value per `spec['by']` group."""
    keys = list(spec.get("by", []))
    empty = pd.DataFrame(columns=[*keys, "med", "lo", "hi", "n"])
    rows, missing = rows_where(t, spec.get("where"))
    if missing:
        return Q(keys, empty, missing=missing)
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    why: list[str] = []
    if "measured" in rows:
        bad = rows[rows["measured"] != True]  # noqa: E712 - pandas mask
        why = sorted(set(bad.get("note", pd.Series(dtype=str)).dropna().astype(str)))
        rows = rows[rows["measured"] == True]  # noqa: E712
    col, over = spec["value"], list(spec.get("over", []))
    # a value with a within-run spread of its own (a steady-state time: `<col>_lo`/`<col>_hi`)
    ends = [f"{col}_lo", f"{col}_hi"] if f"{col}_lo" in rows and f"{col}_hi" in rows else []
    # the GPU counts judged, also where `where` fixed them and no group names them
    gpus = set(rows.dropna(subset=[col])["gpus"].dropna()) if "gpus" in rows else set()
    rows = rows[[*keys, *over, *(["run"] if "run" in rows else []), col, *ends]]
    rows = rows.dropna(subset=[col])
    runs = {
        r.strip() for v in rows.get("run", pd.Series(dtype=str)).dropna() for r in str(v).split(",")
    }
    rows = rows.assign(_v=pd.to_numeric(rows[col], errors="coerce").astype(float))
    for end, name in zip(ends, ("_lo", "_hi"), strict=False):
        rows[name] = pd.to_numeric(rows[end], errors="coerce").astype(float).fillna(rows["_v"])
    if spec.get("abs"):
        rows["_v"] = rows["_v"].abs()
    if spec.get("per_run") == "sum":  # e.g. several metrics of one run added up
        per_run = [*keys, *over] + (["run"] if "run" in rows else [])
        rows = rows.groupby(per_run, dropna=False, as_index=False)["_v"].sum()
    group = [*keys, *over] or ["_all"]
    rows = rows.assign(_all="all")
    g = rows.groupby(group, dropna=False)["_v"]  # repeats: the runs of one group
    frame = pd.DataFrame({"med": g.median(), "lo": g.min(), "hi": g.max(), "n": g.count()})
    if ends and not spec.get("abs") and spec.get("per_run") != "sum":
        gg = rows.groupby(group, dropna=False)
        frame["lo"] = gg["_lo"].min().combine(frame["lo"], min)
        frame["hi"] = gg["_hi"].max().combine(frame["hi"], max)
    frame = frame.reset_index()
    if over:  # then one number per `by` group: mean (or max, min) over the `over` columns
        agg = spec.get("over_agg", "mean")
        g2 = frame.assign(_all="all").groupby(keys or ["_all"], dropna=False)
        frame = g2[["med", "lo", "hi"]].agg(agg).join(g2["n"].min()).reset_index()
    return Q(keys, frame.drop(columns="_all", errors="ignore"), why, gpus=gpus, runs=runs)


def overlaid(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, `where` merged: b in a compare is often a with one filter changed."""
    out = {**base, **{k: v for k, v in over.items() if k != "where"}}
    out["where"] = {**(base.get("where") or {}), **(over.get("where") or {})}
    return out


# ---------------------------------------------------------------- numbers for people
def num(x: float) -> str:
    """Three significant digits, integers as integers: 0.0123, 1.23, 12.3, 123, 12,345."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0 or float(x).is_integer() or abs(x) >= 1000:
        return f"{x:,.0f}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def group_label(row: pd.Series, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = row[k]
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue  # a key the source did not state (the paper's quotes name no GPU count)
        if k == "gpus":
            parts.append(f"{v:g} GPU" if isinstance(v, (int, float)) else f"{v} GPU")
        elif k == "image_size":
            parts.append(f"{v:g} px")
        elif isinstance(v, (bool,)) or k == "pin_memory":
            parts.append(f"{k}={'on' if v else 'off'}" if k == "pin_memory" else f"{k}={v}")
        else:
            parts.append(str(v))
    return " ".join(parts) or "all"


def value_text(row: pd.Series, unit: str = "") -> str:
    s = num(row["med"]) + unit
    # the repeats' min-max, or a steady-state time's within-run range
    if row["lo"] != row["hi"] and row["lo"] == row["lo"]:
        s += f" ({num(row['lo'])}-{num(row['hi'])})"
    return s
