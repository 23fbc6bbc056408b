"""One engine for every claim of the papers: `reference/paper/claims.yaml` is the data.

A claim names its artifact's experiment, the paper's statement, a criterion in words and a
rule: one of the few shapes below, over *quantities* read from the artifact's tidy table. A
quantity is `value` (a column) of the rows matching `where`, one number per group of `by`
columns; repeats of a run (rows that differ only in seed) give the median and their min-max.

    threshold   every group's value  op  than                   (V3a: speed vs FP64 > 100 %)
    compare     a  op  factor x b, or a / b within `ratio`, per matched group of a and b
                (`noise_rel`: a relative difference below it is inconclusive)
    trend       along a column (GPUs, precision), each step rises / falls / stays within tol
    extreme     among a column's values, the expected one(s) are the lowest / highest
    within      |a - b| <= tol_abs + tol_rel x |b|, per group or on the mean over groups
                (`side: below`: only a below b counts, a - b >= -(tol); a above b is fine)
    correlation Pearson r of a and b over matched groups >= r
    spread      (max - min) / mean across `among` <= max_rel
    dominates   the range across `among` exceeds the range across `over` (means of the other)
    step        along a column, values are below `than` up to some point and at or above it after
    status      runs matching each case ended with the status it names (L8d: OOM cells)

Verdicts: holds, does not hold, inconclusive (the medians decide, but the repeats' spreads overlap,
or a gate such as "the model learned" failed) and not measured (with the reason: a gate such as
"needs a GPU", no rows for the quantity, metric not recorded, artifact not implemented).
The same engine judges the paper's own numbers (the artifact's `paper()` table): that is the
self-check, and it supplies the paper's values and ranges shown beside ours.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from run import store

CLAIMS_FILE = store.REFERENCE_DIR / "claims.yaml"
HOLDS, FAILS, INCONCLUSIVE, UNMEASURED = "holds", "does not hold", "inconclusive", "not measured"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNMEASURED)
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
RULES = ("threshold", "compare", "trend", "extreme", "within", "correlation", "spread",
         "dominates", "step", "status", "all")  # fmt: skip
FIELDS = ("experiment", "statement", "source", "criterion")  # what every claim states
# Whose claim: the papers' (the default) or ours, beyond the paper (counted and shown apart).
PAPER, OURS = "paper", "ours"
ORIGINS = (PAPER, OURS)
# A gate that fails makes a claim "not measured", except these, which make it "inconclusive":
# the quantity exists, but the runs cannot speak for the paper's (a model that did not learn).
INCONCLUSIVE_GATES = ("learned", "learned_scenario_b")


class ClaimError(ValueError):
    """claims.yaml is malformed: the message names the claim and the field."""


def load(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    claims = yaml.safe_load(path.read_text())["claims"]
    for cl in claims:
        check(cl)
    ids = [cl["id"] for cl in claims]
    if len(set(ids)) != len(ids):
        raise ClaimError(f"{path}: duplicate claim ids")
    return claims


def check(cl: dict[str, Any]) -> None:
    """A claim's fields, without judging it: what `make test` validates for every entry."""
    cid = cl.get("id", "?")
    for key in ("id", *FIELDS):
        if not cl.get(key):
            raise ClaimError(f"claim {cid}: missing '{key}'")
    if origin(cl) not in ORIGINS:
        raise ClaimError(f"claim {cid}: origin '{cl['origin']}' is not one of {', '.join(ORIGINS)}")
    rule = cl.get("rule")
    if rule is None:
        if not cl.get("not_implemented"):
            raise ClaimError(f"claim {cid}: no rule and no 'not_implemented' reason")
        return
    if rule not in RULES:
        raise ClaimError(f"claim {cid}: unknown rule '{rule}' (one of {', '.join(RULES)})")
    if rule == "all":  # each part is a rule of its own; `part` names it in the evidence
        if len(cl.get("parts") or []) < 2:
            raise ClaimError(f"claim {cid}: rule all needs two or more 'parts'")
        for i, part in enumerate(cl["parts"]):
            if not part.get("part"):
                raise ClaimError(f"claim {cid}: part {i + 1} has no 'part' name")
            check({"id": f"{cid} part {i + 1}", **{k: cl[k] for k in FIELDS}, **part})
        return
    if "op" in cl and cl["op"] not in OPS:
        raise ClaimError(f"claim {cid}: unknown op '{cl['op']}'")
    if cl.get("side", "both") not in WITHIN_SIDES:
        raise ClaimError(
            f"claim {cid}: side '{cl['side']}' is not one of {', '.join(WITHIN_SIDES)}"
        )
    needs = {"threshold": ("q", "than"), "compare": ("a", "b"), "trend": ("q", "along"),
             "extreme": ("q", "among", "expect"), "within": ("a", "b"),
             "correlation": ("a", "b", "r"), "spread": ("q", "among", "max_rel"),
             "dominates": ("q", "among", "over"), "step": ("q", "along", "than"),
             "status": ("cases",)}[rule]  # fmt: skip
    for key in needs:
        if key not in cl:
            raise ClaimError(f"claim {cid}: rule {rule} needs '{key}'")


def origin(cl: dict[str, Any]) -> str:
    """`paper` for the papers' claims, `ours` for those beyond the paper."""
    return cl.get("origin", PAPER)


def for_experiments(exps: list[str], claims: list[dict[str, Any]] | None = None) -> list[dict]:
    return [cl for cl in (claims if claims is not None else load()) if cl["experiment"] in exps]


# ---------------------------------------------------------------- quantities
@dataclass
class Q:
    """One quantity: per group (`keys`), the median over repeats with min, max and count."""

    keys: list[str]
    frame: pd.DataFrame  # keys + med, lo, hi, n
    unmeasured: list[str] = field(default_factory=list)  # why rows were not measured
    missing: str = ""  # the filter that left no rows, with the values the table has
    gpus: set[float] = field(default_factory=set)  # GPU counts of the rows read (coverage)

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


def _where(t: pd.DataFrame, where: dict[str, Any] | None) -> tuple[pd.DataFrame, str]:
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
    rows, missing = _where(t, spec.get("where"))
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
    # the GPU counts judged, also where `where` fixed them and no group names them
    gpus = set(rows.dropna(subset=[col])["gpus"].dropna()) if "gpus" in rows else set()
    rows = rows[[*keys, *over, *(["run"] if "run" in rows else []), col]].dropna(subset=[col])
    rows = rows.assign(_v=pd.to_numeric(rows[col], errors="coerce").astype(float))
    if spec.get("abs"):
        rows["_v"] = rows["_v"].abs()
    if spec.get("per_run") == "sum":  # e.g. several metrics of one run added up
        per_run = [*keys, *over] + (["run"] if "run" in rows else [])
        rows = rows.groupby(per_run, dropna=False, as_index=False)["_v"].sum()
    group = [*keys, *over] or ["_all"]
    rows = rows.assign(_all="all")
    g = rows.groupby(group, dropna=False)["_v"]  # repeats: the runs of one group
    frame = pd.DataFrame({"med": g.median(), "lo": g.min(), "hi": g.max(), "n": g.count()})
    frame = frame.reset_index()
    if over:  # then one number per `by` group: mean (or max, min) over the `over` columns
        agg = spec.get("over_agg", "mean")
        g2 = frame.assign(_all="all").groupby(keys or ["_all"], dropna=False)
        frame = g2[["med", "lo", "hi"]].agg(agg).join(g2["n"].min()).reset_index()
    return Q(keys, frame.drop(columns="_all", errors="ignore"), why, gpus=gpus)


def _sub(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, `where` merged: b in a compare is often a with one filter changed."""
    out = {**base, **{k: v for k, v in over.items() if k != "where"}}
    out["where"] = {**(base.get("where") or {}), **(over.get("where") or {})}
    return out


# ---------------------------------------------------------------- numbers for people
def num(x: float) -> str:
    """Three significant digits, integers as integers: 0.0123, 1.23, 12.3, 123, 12,345."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0 or float(x).is_integer():
        return f"{x:,.0f}"
    if abs(x) >= 1000 or float(x).is_integer() and abs(x) >= 100:
        return f"{x:,.0f}"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{digits}f}"


def _label(row: pd.Series, keys: list[str]) -> str:
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


def _val(row: pd.Series, unit: str = "") -> str:
    s = num(row["med"]) + unit
    if row["n"] > 1 and row["lo"] != row["hi"]:
        s += f" ({num(row['lo'])}-{num(row['hi'])})"
    return s


# ---------------------------------------------------------------- rules
@dataclass
class Outcome:
    ok: bool | None  # None: nothing to judge
    facts: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # the primary numbers (for ranges)
    why: str = ""  # when ok is None
    gpus: set[float] = field(default_factory=set)
    weak_pass: bool = False  # a comparison that passed on medians but not across the spreads
    weak_fail: bool = False  # one that failed on medians but not across the spreads
    firm_fail: bool = False  # one that failed whichever repeats are taken

    def check(self, good: bool, firm: bool) -> None:
        """One comparison: `good` on the medians; `firm` when every end of the repeats' spreads
        (or the stated noise floor) gives the same answer."""
        self.ok = bool(self.ok and good)
        if good:
            self.weak_pass |= not firm
        elif firm:
            self.firm_fail = True
        else:
            self.weak_fail = True

    @property
    def overlap(self) -> bool:
        """Within the spread: a pass that is not firm, or failures that all are not firm. A rule
        that sets `ok` itself (ratios, spreads) decides firmly."""
        if self.ok:
            return self.weak_pass
        return self.weak_fail and not self.firm_fail


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
    out = Outcome(True, gpus=q.gpus)
    for _, r in q.frame.iterrows():
        good = bool(op(r["med"], than))
        out.check(good, op(r["lo"], than) == good == op(r["hi"], than))
        out.facts.append(f"{_label(r, q.keys)}: {_val(r, unit)}")
        out.values.append(float(r["med"]))
    out.facts.append(f"(criterion {cl.get('op', '>')} {num(than)}{unit})")
    return out


def _pairs(cl: dict[str, Any], t: pd.DataFrame) -> tuple[Q, Q, pd.DataFrame]:
    a = select(t, cl["a"])
    b = select(t, _sub(cl["a"], cl["b"]))
    on = [k for k in a.keys if k in b.keys]
    if a.empty() or b.empty():
        return a, b, pd.DataFrame()
    m = (
        a.frame.merge(b.frame, on=on, suffixes=("_a", "_b"))
        if on
        else a.frame.merge(b.frame, how="cross", suffixes=("_a", "_b"))
    )
    return a, b, m


def _side(row: pd.Series, x: str) -> pd.Series:
    """Side a or b of a row of _pairs' merge, as _val takes it."""
    return pd.Series({k: row[f"{k}_{x}"] for k in ("med", "lo", "hi", "n")})


def _compare(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    a, b, m = _pairs(cl, t)
    if m.empty:
        return _none(cl, a, b)
    names = cl.get("names", ["a", "b"])
    keys = [k for k in dict.fromkeys([*a.keys, *b.keys]) if k in m]
    out = Outcome(True, gpus=a.gpus | b.gpus)
    ratios = []
    for _, r in m.iterrows():
        ratio = r["med_a"] / r["med_b"] if r["med_b"] else math.inf
        ratios.append(ratio)
        out.facts.append(
            f"{_label(r, keys)}: {names[0]} {_val(_side(r, 'a'))} vs {names[1]} "
            f"{_val(_side(r, 'b'))} (ratio {num(ratio)})"
        )
        if "ratio" not in cl:
            op, f = OPS[cl.get("op", ">")], float(cl.get("factor", 1.0))
            good = bool(op(r["med_a"], f * r["med_b"]))
            # the ends most and least favourable to a passing comparison
            up = op in (operator.gt, operator.ge)
            best = op(r["hi_a"], f * r["lo_b"]) if up else op(r["lo_a"], f * r["hi_b"])
            worst = op(r["lo_a"], f * r["hi_b"]) if up else op(r["hi_a"], f * r["lo_b"])
            # without repeats, a stated noise floor: runs differing by less decide nothing
            noise = float(cl.get("noise_rel", 0.0)) * abs(r["med_b"])
            quiet = noise > 0 and abs(r["med_a"] - r["med_b"]) <= noise
            out.check(good, best == good == worst and not quiet)
        out.values.append(ratio)
    if "ratio" in cl:
        lo, hi = (float(x) for x in cl["ratio"])
        vals = [sum(ratios) / len(ratios)] if cl.get("aggregate") == "mean" else ratios
        out.ok = all(lo <= v <= hi for v in vals)
        if cl.get("aggregate") == "mean":
            out.facts.append(f"mean ratio {num(vals[0])}")
            out.values = vals
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
    out = Outcome(True, gpus=q.gpus)
    groups = f.groupby(rest, dropna=False) if rest else [((), f)]
    decided = False
    for _key, g in groups:
        g = g.sort_values("_x")
        if len(g) < 2:
            continue
        decided = True
        meds = g["med"].tolist()
        label = _label(g.iloc[0], rest) if rest else ""
        seq = " -> ".join(f"{_label(r, [along])}: {_val(r)}" for _, r in g.iterrows())
        out.facts.append(f"{label + ': ' if label else ''}{seq}")
        out.values.extend(meds)
        for (_, p), (_, n) in zip(g.iloc[:-1].iterrows(), g.iloc[1:].iterrows(), strict=True):
            if direction == "flat":
                out.check(bool(abs(n["med"] - meds[0]) <= tol * abs(meds[0])), True)
                continue
            k = float(step) if step else 1.0
            if direction == "decreasing":
                good = bool(n["med"] < p["med"] * k)
                best, worst = n["lo"] < p["hi"] * k, n["hi"] < p["lo"] * k
            else:
                good = bool(n["med"] > p["med"] * k)
                best, worst = n["hi"] > p["lo"] * k, n["lo"] > p["hi"] * k
            out.check(good, best == good == worst)
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
    out = Outcome(True, gpus=q.gpus)
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
        out.check(good, bool(firm))
        label = _label(g.iloc[0], rest) if rest else ""
        vals = ", ".join(f"{r[among]} {_val(r)}" for _, r in g.iterrows())
        out.facts.append(f"{label + ': ' if label else ''}{vals}")
        out.values.extend(g["med"].tolist())
    if not decided:
        return Outcome(None, why=f"needs {'/'.join(map(str, expect))} and another {among}")
    return out


WITHIN_SIDES = ("both", "below")


def _within(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    a, b, m = _pairs(cl, t)
    if m.empty:
        return _none(cl, a, b)
    tol_abs, tol_rel = float(cl.get("tol_abs", 0.0)), float(cl.get("tol_rel", 0.0))
    names = cl.get("names", ["a", "b"])
    keys = [k for k in dict.fromkeys([*a.keys, *b.keys]) if k in m]
    out = Outcome(True, gpus=a.gpus | b.gpus)
    for _, r in m.iterrows():
        out.facts.append(
            f"{_label(r, keys)}: {names[0]} {_val(_side(r, 'a'))} vs {names[1]} {_val(_side(r, 'b'))}"
        )
    # the difference on the medians, and its widest reach across the repeats' spreads
    diff, low, high = m["med_a"] - m["med_b"], m["lo_a"] - m["hi_b"], m["hi_a"] - m["lo_b"]
    if cl.get("aggregate") == "mean":
        lim = tol_abs + tol_rel * float(m["med_b"].abs().mean())
        cases = [(float(diff.mean()), float(low.mean()), float(high.mean()), lim)]
        out.facts.append(f"mean difference {num(cases[0][0])}")
        out.values = [cases[0][0]]
    else:
        lims = tol_abs + tol_rel * m["med_b"].abs()
        cases = list(zip(diff, low, high, lims, strict=True))
        # one-sided: the shortfall that matters is the most negative difference
        big = (f"smallest difference {num(float(diff.min()))}" if cl.get("side") == "below"
               else f"largest difference {num(float(diff.abs().max()))}")  # fmt: skip
        if tol_rel:  # the criterion is relative: say so beside the absolute figure
            big += f" ({num(100 * float((diff.abs() / m['med_b'].abs()).max()))} % of {names[1]})"
        out.facts.append(big)
        out.values = diff.abs().tolist()
    below = cl.get("side", "both") == "below"
    for d, lo, hi, lim in cases:
        # firm: every pair of spread ends agrees with the medians' answer
        if below:  # only falling short counts: a better `a` is no departure
            good, firm = d >= -lim, (lo >= -lim if d >= -lim else hi < -lim)
        else:
            good = abs(d) <= lim
            firm = max(abs(lo), abs(hi)) <= lim if good else (lo > lim or hi < -lim)
        out.check(good, firm)
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
    vals = ", ".join(f"{r[cl['among']]} {_val(r)}" for _, r in q.frame.iterrows())
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
    seq = " -> ".join(f"{_label(r, [cl['along']])}: {_val(r)}" for _, r in f.iterrows())
    facts = [seq, f"(criterion: below {num(than)}, then {num(than)} or more)"]
    if len(f) < 2:
        return Outcome(None, why=f"needs two or more values of {cl['along']}")
    # a step: some below, then only at or above (never back below)
    ok = above[0] is False and any(above) and above == sorted(above)
    return Outcome(ok, facts=facts, values=f["med"].tolist(), gpus=q.gpus)


def _status(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    out = Outcome(True)
    for case in cl["cases"]:
        rows, missing = _where(t, case["where"])
        if missing:
            return Outcome(None, why=missing)
        rows = rows.drop_duplicates("run") if "run" in rows else rows
        got = rows["status"].tolist()
        out.ok &= all(s == case["status"] for s in got)
        out.facts.append(
            ", ".join(
                f"{_label(r, list(case['where']))}: {r['status']}" for _, r in rows.iterrows()
            )
            + f" (expected {case['status']})"
        )
        out.gpus |= set(rows["gpus"]) if "gpus" in rows else set()
    return out


def _all(cl: dict[str, Any], t: pd.DataFrame) -> Outcome:
    """A claim of several parts ("cuts HtoD but raises sync"): it holds when every part holds.

    Any part not measured leaves the claim not measured; any part within the spread of the
    repeats makes it inconclusive. The range check reads the first part's numbers."""
    out = Outcome(True)
    for i, part in enumerate(cl["parts"]):
        o = JUDGES[part["rule"]](part, t)
        if o.ok is None:
            return Outcome(None, why=f"{part['part']}: {o.why}")
        out.ok = bool(out.ok and o.ok)
        out.weak_pass |= o.ok and o.weak_pass
        out.weak_fail |= not o.ok and o.overlap
        out.firm_fail |= not o.ok and not o.overlap
        out.facts.append(f"{part['part']}: " + "; ".join(o.facts))
        out.values = out.values if i else o.values
        out.gpus |= o.gpus
    return out


JUDGES = {"all": _all, "threshold": _threshold, "compare": _compare, "trend": _trend, "extreme": _extreme,
          "within": _within, "correlation": _correlation, "spread": _spread,
          "dominates": _dominates, "step": _step, "status": _status}  # fmt: skip


# ---------------------------------------------------------------- verdicts
def outcome(cl: dict[str, Any], t: pd.DataFrame | None) -> Outcome:
    if t is None or t.empty or cl.get("rule") is None:
        return Outcome(None, why="no data")
    return JUDGES[cl["rule"]](cl, t)


def verdict_of(o: Outcome) -> str:
    if o.ok is None:
        return UNMEASURED
    if o.overlap:
        return INCONCLUSIVE
    return HOLDS if o.ok else FAILS


def coverage(o: Outcome, paper_gpus: list[int], beyond: bool = False) -> str:
    """Which GPU counts decided a verdict, beside the paper's (for a claim of our own, the
    counts our paper profile runs: the papers never ran those experiments)."""
    if not o.gpus or not paper_gpus:
        return ""
    ours, theirs = _span(sorted(int(g) for g in o.gpus)), _span(sorted(paper_gpus))
    if beyond:
        return f"judged on {ours} GPU(s) (the paper profile runs {theirs})"
    return f"judged on {ours} of the paper's {theirs} GPUs"


def _span(xs: list[int]) -> str:
    if len(xs) > 1 and xs == list(range(xs[0], xs[-1] + 1)):
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(map(str, xs))


def judge(
    cl: dict[str, Any],
    ours: pd.DataFrame | None,
    paper: pd.DataFrame | None = None,
    gates: dict[str, str] | None = None,
    paper_gpus: list[int] | None = None,
) -> dict[str, Any]:
    """The verdict on one claim: ours, the paper's own (self-check) and what decided both."""
    mine = outcome(cl, ours)
    theirs = outcome(cl, paper) if paper is not None else Outcome(None, why="no published data")
    verdict, reason = verdict_of(mine), mine.why
    for gate in cl.get("needs", []):
        why = (gates or {}).get(gate)
        if not why:
            continue
        if gate not in INCONCLUSIVE_GATES:
            # the gate says why nothing could be measured, which beats a missing-rows reason
            verdict, reason = UNMEASURED, why
            break
        if verdict != UNMEASURED:
            verdict, reason = INCONCLUSIVE, why
    if cl.get("not_implemented"):
        verdict, reason = UNMEASURED, f"not implemented yet: {cl['not_implemented']}"
    if verdict == INCONCLUSIVE and not reason:
        reason = "the difference is within the spread of the repeats"
    out: dict[str, Any] = {
        "id": cl["id"],
        "origin": origin(cl),
        "experiment": cl["experiment"],
        "statement": cl["statement"],
        "source": cl["source"],
        "criterion": cl["criterion"],
        "verdict": verdict,
        "reason": reason,
        "evidence": "; ".join(mine.facts),
        "paper_verdict": verdict_of(theirs),
        "paper_evidence": "; ".join(theirs.facts) if theirs.ok is not None else theirs.why,
        "coverage": coverage(mine, paper_gpus or [], origin(cl) == OURS)
        if verdict != UNMEASURED
        else "",
        "in_paper_range": None,
        "paper_range": None,
    }
    if cl.get("range") == "paper" and theirs.values:
        lo, hi = min(theirs.values), max(theirs.values)
        out["paper_range"] = [lo, hi]
        if mine.values:
            out["in_paper_range"] = all(lo <= v <= hi for v in mine.values)
    return out
