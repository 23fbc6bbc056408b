"""The rules: one judge per shape of claim, each reading quantities of a table into an Outcome.

    threshold   every group's value  op  than                   (V3a: speed vs FP64 > 100 %)
    compare     a  op  factor x b, or a / b within `ratio`, per matched group of a and b
    trend       along a column (GPUs, precision), each step rises / falls / stays within tol
    extreme     among a column's values, the expected one(s) are the lowest / highest
    within      |a - b| <= tol_abs + tol_rel x |b|, per group or on the mean over groups
                (`side: below`: only a below b counts, a - b >= -(tol); a above b is fine)
    correlation Pearson r of a and b over matched groups >= r
    spread      (max - min) / mean across `among` <= max_rel
    dominates   the range across `among` exceeds the range across `over` (means of the other)
    step        along a column, values are below `than` up to some point and at or above it after
    status      runs matching each case ended with the status it names (L8d: OOM cells)
    all         every part, each a rule of its own, holds

A comparison is firm when every end of the cells' spreads (repeats, or a steady-state time's
within-run spread) gives the medians' answer and, for cells without repeats, its margin is larger
than the run-to-run spread the same results folder measured for its quantity (analysis/noise.py,
passed in as the claim's `_noise`; no margin is a constant of the claims file); one that is not
is within the noise (the verdict is inconclusive). Each comparison records its distance (`gaps`),
which the summary sets beside the noise. `cells` (claims.yaml) says which cells must pass: all, a
majority, or the aggregate (one number over them).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import pandas as pd

from analysis.claims import spec as cs
from analysis.claims.outcome import Outcome, margin, within_noise
from analysis.claims.quantities import Q, group_label, num, overlaid, rows_where, select, value_text
from analysis.claims.spec import OPS


def _none(cl: dict[str, Any], *qs: Q) -> Outcome:
    reasons = sorted({w for q in qs for w in q.unmeasured})
    if reasons:
        return Outcome(None, why="; ".join(reasons))
    missing = [q.missing for q in qs if q.missing]
    if missing:
        return Outcome(None, why=missing[0])
    return Outcome(None, why="no finished runs give this quantity")


def _threshold(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.empty():
        return _none(cl, q)
    op, than, unit = OPS[cl.get("op", ">")], float(cl["than"]), cl.get("unit", "")
    out = Outcome(True, gpus=q.gpus, runs=q.runs)
    points = cs.timing(cl) == "difference"  # a % difference: the margin is in points
    for _, r in q.frame.iterrows():
        good = bool(op(r["med"], than))
        m = margin(cl, r["n"], ref=than)
        quiet = (abs(r["med"] - than) <= 100 * m) if points else within_noise(r["med"], than, m)
        out.quiet |= quiet
        out.gap(r["med"], than)
        out.check(good, op(r["lo"], than) == good == op(r["hi"], than) and not quiet)
        out.facts.append(f"{group_label(r, q.keys)}: {value_text(r, unit)}")
        out.values.append(float(r["med"]))
    out.facts.append(f"(criterion {cl.get('op', '>')} {num(than)}{unit})")
    return out


def _pairs(cl: dict[str, Any], t: pd.DataFrame) -> tuple[Q, Q, pd.DataFrame]:
    a = select(t, cl["a"])
    b = select(t, overlaid(cl["a"], cl["b"]))
    on = [k for k in a.keys if k in b.keys]
    if a.empty() or b.empty():
        return a, b, pd.DataFrame()
    how: dict[str, Any] = {"on": on} if on else {"how": "cross"}
    return a, b, a.frame.merge(b.frame, suffixes=("_a", "_b"), **how)


def _side(row: pd.Series, x: str) -> pd.Series:
    """Side a or b of a row of _pairs' merge, as value_text takes it."""
    return pd.Series({k: row[f"{k}_{x}"] for k in ("med", "lo", "hi", "n")})


def _compare(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    a, b, m = _pairs(cl, t)
    if m.empty:
        return _none(cl, a, b)
    names = cl.get("names", ["a", "b"])
    keys = [k for k in dict.fromkeys([*a.keys, *b.keys]) if k in m]
    out = Outcome(True, gpus=a.gpus | b.gpus, runs=a.runs | b.runs)
    ratios, margins = [], []
    for _, r in m.iterrows():
        ratio = r["med_a"] / r["med_b"] if r["med_b"] else math.inf
        floor = margin(cl, r["n_a"], r["n_b"], ref=float(cl.get("factor", 1.0)) * r["med_b"])
        ratios.append(ratio)
        out.facts.append(
            f"{group_label(r, keys)}: {names[0]} {value_text(_side(r, 'a'))} vs {names[1]} "
            f"{value_text(_side(r, 'b'))} (ratio {num(ratio)})"
        )
        if "ratio" not in cl:
            op, f = OPS[cl.get("op", ">")], float(cl.get("factor", 1.0))
            good = bool(op(r["med_a"], f * r["med_b"]))
            # the ends most and least favourable to a passing comparison
            up = op in (operator.gt, operator.ge)
            best = op(r["hi_a"], f * r["lo_b"]) if up else op(r["lo_a"], f * r["hi_b"])
            worst = op(r["lo_a"], f * r["hi_b"]) if up else op(r["hi_a"], f * r["lo_b"])
            # runs differing by less than the noise (stated, or measured) decide nothing
            quiet = within_noise(r["med_a"], f * r["med_b"], floor)
            out.quiet |= quiet
            out.gap(r["med_a"], f * r["med_b"])
            out.check(good, best == good == worst and not quiet)
        out.values.append(ratio)
        margins.append(floor)
    if "ratio" in cl:
        lo, hi = (float(x) for x in cl["ratio"])
        if cl.get("cells") == "aggregate":
            ratios, margins = [sum(ratios) / len(ratios)], [max(margins)]
            out.facts.append(f"mean ratio {num(ratios[0])}")
            out.values = ratios
        for v, m in zip(ratios, margins, strict=True):
            quiet = within_noise(v, lo, m) or within_noise(v, hi, m)
            out.quiet |= quiet
            out.note(min(abs(v - lo) / abs(lo) if lo else math.inf,
                                abs(v - hi) / abs(hi) if hi else math.inf))  # fmt: skip
            out.check(lo <= v <= hi, not quiet)
        out.facts.append(f"(criterion: ratio within {num(lo)}-{num(hi)})")
    return out


def _trend(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.empty():
        return _none(cl, q)
    along = cl["along"]
    order = cl.get("order")
    f = q.frame.copy()
    f["_x"] = f[along].map(order.index) if order else f[along]
    start = cl.get("from")
    if start is not None:
        f = f[f["_x"] >= (order.index(start) if order else start)]
    rest = [k for k in q.keys if k != along]
    direction, tol = cl.get("direction", "decreasing"), float(cl.get("tolerance", 0.0))
    step = cl.get("step_ratio")
    out = Outcome(True, gpus=q.gpus, runs=q.runs)
    groups = f.groupby(rest, dropna=False) if rest else [((), f)]
    decided = False
    for _key, g in groups:
        g = g.sort_values("_x")
        if len(g) < 2:
            continue
        decided = True
        meds = g["med"].tolist()
        label = group_label(g.iloc[0], rest) if rest else ""
        seq = " -> ".join(f"{group_label(r, [along])}: {value_text(r)}" for _, r in g.iterrows())
        out.facts.append(f"{label + ': ' if label else ''}{seq}")
        out.values.extend(meds)
        for (_, p), (_, n) in zip(g.iloc[:-1].iterrows(), g.iloc[1:].iterrows(), strict=True):
            m = margin(cl, p["n"], n["n"], g.iloc[0]["n"], ref=p["med"])
            if direction == "flat":
                dev, lim = abs(n["med"] - meds[0]), tol * abs(meds[0])
                quiet = m > 0 and (math.isinf(m) or abs(dev - lim) <= m * abs(meds[0]))
                if meds[0]:
                    out.note(abs(dev - lim) / abs(meds[0]))
                out.quiet |= quiet
                out.check(bool(dev <= lim), not quiet)
                continue
            k = float(step) if step else 1.0
            if direction == "decreasing":
                good = bool(n["med"] < p["med"] * k)
                best, worst = n["lo"] < p["hi"] * k, n["hi"] < p["lo"] * k
            else:
                good = bool(n["med"] > p["med"] * k)
                best, worst = n["hi"] > p["lo"] * k, n["lo"] > p["hi"] * k
            quiet = within_noise(n["med"], p["med"] * k, m)
            out.quiet |= quiet
            out.gap(n["med"], p["med"] * k)
            out.check(good, best == good == worst and not quiet)
    if not decided:
        have = sorted(f[along].dropna().unique().tolist()) if along in f else []
        since = f" from {start} on" if start is not None else ""
        return Outcome(None, why=f"needs runs at two or more {along}{since} (ran: "
                       f"{', '.join(map(str, have)) or 'none'})")  # fmt: skip
    if direction == "flat":
        out.facts.append(f"(criterion: within {num(100 * tol)} % of the first)")
    elif step:
        out.facts.append(f"(criterion: each step x{num(float(step))} or beyond)")
    return out


def _extreme(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.empty():
        return _none(cl, q)
    among, kind = cl["among"], cl.get("kind", "lowest")
    expect = cl["expect"] if isinstance(cl["expect"], list) else [cl["expect"]]
    rest = [k for k in q.keys if k != among]
    out = Outcome(True, gpus=q.gpus, runs=q.runs)
    groups = q.frame.groupby(rest, dropna=False) if rest else [((), q.frame)]
    decided = False
    for _, g in groups:
        if g[among].nunique() < 2 or not g[among].isin(expect).any():
            continue
        decided = True
        g = g.sort_values("med", ascending=(kind == "lowest"))
        top = g.iloc[0]
        good = bool(top[among] in expect)
        # the runner-up on the other side: the best non-expected when the expected won, else
        # the best expected; firm when the two spreads do not touch
        rivals = g[~g[among].isin(expect) if good else g[among].isin(expect)]
        firm = rivals.empty or (
            top["hi"] < rivals.iloc[0]["lo"]
            if kind == "lowest"
            else top["lo"] > rivals.iloc[0]["hi"]
        )
        if not rivals.empty:
            rival = rivals.iloc[0]
            quiet = within_noise(top["med"], rival["med"],
                                 margin(cl, top["n"], rival["n"], ref=rival["med"]))  # fmt: skip
            out.quiet |= quiet
            out.gap(top["med"], rival["med"])
            firm = firm and not quiet
        out.check(good, bool(firm))
        label = group_label(g.iloc[0], rest) if rest else ""
        vals = ", ".join(f"{r[among]} {value_text(r)}" for _, r in g.iterrows())
        out.facts.append(f"{label + ': ' if label else ''}{vals}")
        out.values.extend(g["med"].tolist())
    if not decided:
        return Outcome(None, why=f"needs {'/'.join(map(str, expect))} and another {among}")
    return out


def _within(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    a, b, m = _pairs(cl, t)
    if m.empty:
        return _none(cl, a, b)
    tol_abs, tol_rel = float(cl.get("tol_abs", 0.0)), float(cl.get("tol_rel", 0.0))
    names = cl.get("names", ["a", "b"])
    keys = [k for k in dict.fromkeys([*a.keys, *b.keys]) if k in m]
    out = Outcome(True, gpus=a.gpus | b.gpus, runs=a.runs | b.runs)
    for _, r in m.iterrows():
        out.facts.append(
            f"{group_label(r, keys)}: {names[0]} {value_text(_side(r, 'a'))} vs {names[1]} {value_text(_side(r, 'b'))}"
        )
    # the difference on the medians, and its widest reach across the repeats' spreads
    diff, low, high = m["med_a"] - m["med_b"], m["lo_a"] - m["hi_b"], m["hi_a"] - m["lo_b"]
    # the noise in the units of the difference: a relative spread of b's value
    noise = [margin(cl, na, nb, ref=bv) * abs(bv)
             for na, nb, bv in zip(m["n_a"], m["n_b"], m["med_b"], strict=True)]  # fmt: skip
    if cl.get("cells") == "aggregate":
        lim = tol_abs + tol_rel * float(m["med_b"].abs().mean())
        cases = [(float(diff.mean()), float(low.mean()), float(high.mean()), lim, max(noise),
                  float(m["med_b"].abs().mean()))]  # fmt: skip
        out.facts.append(f"mean difference {num(cases[0][0])}")
        out.values = [cases[0][0]]
    else:
        lims = tol_abs + tol_rel * m["med_b"].abs()
        cases = list(zip(diff, low, high, lims, noise, m["med_b"].abs(), strict=True))
        # one-sided: the shortfall that matters is the most negative difference
        big = (f"smallest difference {num(float(diff.min()))}" if cl.get("side") == "below"
               else f"largest difference {num(float(diff.abs().max()))}")  # fmt: skip
        if tol_rel:  # the criterion is relative: say so beside the absolute figure
            big += f" ({num(100 * float((diff.abs() / m['med_b'].abs()).max()))} % of {names[1]})"
        out.facts.append(big)
        out.values = diff.abs().tolist()
    below = cl.get("side", "both") == "below"
    for d, lo, hi, lim, nz, bv in cases:
        # firm: every pair of spread ends agrees with the medians' answer, and the difference
        # is further from the limit than the noise could move it
        if below:  # only falling short counts: a better `a` is no departure
            good, firm = d >= -lim, (lo >= -lim if d >= -lim else hi < -lim)
            quiet = math.isinf(nz) or abs(d + lim) <= nz
        else:
            good = abs(d) <= lim
            firm = max(abs(lo), abs(hi)) <= lim if good else (lo > lim or hi < -lim)
            quiet = math.isinf(nz) or abs(abs(d) - lim) <= nz
        quiet = quiet and nz > 0
        out.quiet |= quiet
        if bv:  # how far the difference is from its limit, relative to b
            short = abs(d + lim if below else abs(d) - lim)
            out.note(short / float(bv), short)
        out.check(good, firm and not quiet)
    tol = " + ".join([num(tol_abs)] * bool(tol_abs) + [f"{num(100 * tol_rel)} %"] * bool(tol_rel))
    where = f"at most {tol or '0'} below" if below else f"within {tol or '0'}"
    out.facts.append(f"(criterion: {where})")
    return out


def _correlation(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    a, b, m = _pairs(cl, t)
    if a.empty() or b.empty():
        return _none(cl, a, b)
    if len(m) < 3:
        return Outcome(None, why=f"needs 3 or more matched groups (have {len(m)})")
    r = float(m["med_a"].corr(m["med_b"]))
    return Outcome(
        r >= float(cl["r"]), facts=[f"Pearson r = {num(r)} over {len(m)} groups"], values=[r],
        gpus=a.gpus,
    )  # fmt: skip


def _spread(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.frame[cl["among"]].nunique() < 2 if not q.empty() else True:
        return _none(cl, q) if q.empty() else Outcome(None, why=f"needs 2 or more {cl['among']}")
    meds = q.frame["med"]
    rel = float((meds.max() - meds.min()) / meds.mean()) if meds.mean() else math.inf
    vals = ", ".join(f"{r[cl['among']]} {value_text(r)}" for _, r in q.frame.iterrows())
    return Outcome(
        rel <= float(cl["max_rel"]),
        facts=[vals, f"(max - min) / mean = {num(rel)} (criterion <= {num(cl['max_rel'])})"],
        values=[rel], gpus=q.gpus,
    )  # fmt: skip


def _dominates(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.empty():
        return _none(cl, q)
    f = q.frame
    wide = f.groupby(cl["among"])["med"].mean()
    narrow = f.groupby(cl["over"])["med"].mean()
    if len(wide) < 2 or len(narrow) < 2:
        return Outcome(None, why=f"needs 2 or more of each of {cl['among']} and {cl['over']}")
    r_w, r_n = float(wide.max() - wide.min()), float(narrow.max() - narrow.min())
    return Outcome(
        r_w > r_n,
        facts=[f"range over {cl['among']}: {num(r_w)}", f"range over {cl['over']}: {num(r_n)}"],
        values=[r_w, r_n], gpus=q.gpus,
    )  # fmt: skip


def _step(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    q = select(t, cl["q"])
    if q.empty():
        return _none(cl, q)
    f = q.frame.sort_values(cl["along"])
    than = float(cl["than"])
    above = [bool(v >= than) for v in f["med"]]
    seq = " -> ".join(f"{group_label(r, [cl['along']])}: {value_text(r)}" for _, r in f.iterrows())
    facts = [seq, f"(criterion: below {num(than)}, then {num(than)} or more)"]
    if len(f) < 2:
        return Outcome(None, why=f"needs two or more values of {cl['along']}")
    # a step: some below, then only at or above (never back below)
    ok = above[0] is False and any(above) and above == sorted(above)
    out = Outcome(ok, facts=facts, values=f["med"].tolist(), gpus=q.gpus, runs=q.runs)
    out.quiet = any(within_noise(r["med"], than, margin(cl, r["n"], ref=than))
                    for _, r in f.iterrows())  # fmt: skip
    out.gaps = [(abs(r["med"] - than) / abs(than), abs(r["med"] - than), None)
                for _, r in f.iterrows() if than]  # fmt: skip
    out.weak_pass, out.weak_fail = ok and out.quiet, not ok and out.quiet
    return out


def _status(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    out = Outcome(True)
    for case in cl["cases"]:
        rows, missing = rows_where(t, case["where"])
        if missing:
            return Outcome(None, why=missing)
        rows = rows.drop_duplicates("run") if "run" in rows else rows
        got = rows["status"].tolist()
        out.ok &= all(s == case["status"] for s in got)
        seen = (f"{group_label(r, list(case['where']))}: {r['status']}" for _, r in rows.iterrows())
        out.facts.append(", ".join(seen) + f" (expected {case['status']})")
        out.gpus |= set(rows["gpus"]) if "gpus" in rows else set()
    return out


def _all(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    """A claim of several parts ("cuts HtoD but raises sync"): it holds when every part holds.

    Any part not measured leaves the claim not measured; any part within the spread of the
    repeats makes it inconclusive. The range check reads the first part's numbers."""
    out = Outcome(True)
    for i, part in enumerate(cl["parts"]):
        o = judge_rule({"_noise": cl.get("_noise"), "_noise_points": cl.get("_noise_points"),
                        **part}, t)  # fmt: skip
        if o.ok is None:
            return Outcome(None, why=f"{part['part']}: {o.why}")
        out.ok = bool(out.ok and o.ok)
        out.weak_pass |= o.ok and o.weak_pass
        out.weak_fail |= not o.ok and o.overlap
        out.firm_fail |= not o.ok and not o.overlap
        out.quiet |= o.quiet
        out.gaps.extend(o.gaps)
        out.runs |= o.runs
        out.cell_text = "; ".join(x for x in (out.cell_text, o.cell_text and
                                              f"{part['part']}: {o.cell_text}") if x)  # fmt: skip
        out.facts.append(f"{part['part']}: " + "; ".join(o.facts))
        out.values = out.values if i else o.values
        out.gpus |= o.gpus
    return out


JUDGES = {"all": _all, "threshold": _threshold, "compare": _compare, "trend": _trend, "extreme": _extreme,
          "within": _within, "correlation": _correlation, "spread": _spread,
          "dominates": _dominates, "step": _step, "status": _status}  # fmt: skip


def judge_rule(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    """A claim's (or part's) rule on a table, its cells decided as `cells` says."""
    o = JUDGES[cl["rule"]](cl, t)
    if cl["rule"] != "all":
        o.settle(cl.get("cells", "all"))
    return o
