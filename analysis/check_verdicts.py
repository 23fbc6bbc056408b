"""Do two independent sweeps agree? The verdicts of two results folders, claim by claim.

    python -m analysis.check_verdicts results/check-verdicts/a results/check-verdicts/b --scale smoke

Reads each folder's tables (<folder>/<scale>/tables/*.json, written by `python -m analysis`)
and prints one line per claim with both verdicts. Two sweeps of the same work on the same machine
must agree on every claim that neither calls inconclusive: one saying "holds" where the other
says "does not hold" means a verdict was decided inside the noise. And every set of runs that did
identical work, in either sweep (table-noise.csv), must fall inside the margin each decided
verdict used for its quantity and rank counts: a larger spread in the other sweep means that
verdict was decided on a margin the machine does not keep. Either failure: exit status 1.
`make check-verdicts` runs the timing-heavy targets twice into separate folders and then this.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import noise
from analysis.claims import verdicts as cl
from analysis.noise import TARGET as NOISE_TARGET
from run.program import program

DECIDED = (cl.HOLDS, cl.FAILS)


def verdicts(root: Path, scale: str) -> dict[str, dict[str, Any]]:
    """claim id -> its judged entry, from every table of one results folder."""
    tables = root / scale / "tables"
    if not tables.is_dir():
        raise FileNotFoundError(f"{tables} does not exist: run the targets into {root} first")
    out: dict[str, dict[str, Any]] = {}
    for meta in sorted(tables.glob("*.json")):
        try:
            claims = json.loads(meta.read_text()).get("claims", [])
        except (OSError, ValueError, AttributeError) as exc:  # not a table's record
            print(f"warning: {meta}: not read ({exc.__class__.__name__})", file=sys.stderr)
            continue
        for claim in claims:
            out[claim["id"]] = claim
    return out


def noise_of(root: Path, scale: str) -> str:
    """The largest spreads of a folder's time measures, for the printout."""
    t = sets_of(root, scale)
    if t is None:
        return "no noise table"
    t = noise.largest(t)
    t = t[t["measure"].isin(["total_time_s", "total_time_s_steady", "s_per_it"])]
    parts = [f"{r['workload']} {r['measure']} {r['gpus']} rank(s) {r['spread_pct']:.1f} %"
             for _, r in t.iterrows() if not math.isnan(r["spread_pct"])]  # fmt: skip
    return ", ".join(parts) or "not measured"


def sets_of(root: Path, scale: str) -> pd.DataFrame | None:
    """A folder's sets of identical runs (table-noise.csv), or None without that table."""
    path = root / scale / "tables" / f"{NOISE_TARGET}.csv"
    if not path.is_file():
        return None
    return pd.read_csv(path)


def outside_margins(judged: dict[str, dict[str, Any]], sets: dict[str, pd.DataFrame]) -> list[str]:
    """Lines naming each set of identical runs (of any folder in `sets`) whose spread exceeds the
    margin a decided verdict of `judged` used for that quantity and rank count."""
    lines = []
    for cid in sorted(judged, key=_order):
        c = judged[cid]
        scope = c.get("margin_of")
        if c.get("verdict") not in DECIDED or not scope:
            continue
        points = c.get("margin_points") is not None
        m = c["margin_points"] if points else (c.get("margin_pct") or 0.0) / 100.0
        for name, t in sets.items():
            for _, r in noise.outside(t, scope["workload"], scope["measures"], scope["gpus"],
                                      m, points).iterrows():  # fmt: skip
                size = (f"{r['spread_points']:.1f} points" if points
                        else f"{r['spread_pct']:.1f} %")  # fmt: skip
                used = f"{m:.1f} points" if points else f"{100 * m:.1f} %"
                gap, wider = c.get("gap_pct"), r["spread_pct"]
                # whether the verdict's own distance would have cleared the wider spread too
                clears = ("" if gap is None or points else
                          f"; its distance {gap:.1f} % {'clears' if gap > wider else 'does not clear'} it")  # fmt: skip
                lines.append(f"{cid} ({c['verdict']} on a margin of {used}): {name}'s "
                             f"{r['kind']} of {r['measure']} at {int(r['gpus'])} rank(s) "
                             f"({r['experiments']}) spread {size}{clears}")  # fmt: skip
    return lines


def compare(a: dict[str, dict], b: dict[str, dict]) -> tuple[list[str], list[str]]:
    """(printable lines, ids of claims decided both times with opposite verdicts)."""
    lines, conflicts = [], []
    for cid in sorted(set(a) | set(b), key=_order):
        va, vb = a.get(cid, {}).get("verdict", "-"), b.get(cid, {}).get("verdict", "-")
        if va in DECIDED and vb in DECIDED and va != vb:
            mark = "DISAGREE"
            conflicts.append(cid)
        elif va == vb:
            mark = "same"
        else:
            mark = "one inconclusive" if cl.INCONCLUSIVE in (va, vb) else "differ"
        lines.append(f"{cid:5} {va:14} {vb:14} {mark}")
    return lines, conflicts


def _order(cid: str) -> tuple[str, int, str]:
    digits = "".join(ch for ch in cid[1:] if ch.isdigit())
    return cid[0], int(digits or 0), cid


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis.check_verdicts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("a", type=Path, help="first results folder")
    ap.add_argument("b", type=Path, help="second results folder")
    ap.add_argument("--scale", default="smoke")
    args = ap.parse_args(argv)
    va, vb = verdicts(args.a, args.scale), verdicts(args.b, args.scale)
    lines, conflicts = compare(va, vb)
    print(f"claim {'A: ' + str(args.a):14} {'B: ' + str(args.b):14}")
    print("\n".join(lines))
    print(f"noise A: {noise_of(args.a, args.scale)}")
    print(f"noise B: {noise_of(args.b, args.scale)}")
    both = [c for c in set(va) & set(vb) if va[c]["verdict"] in DECIDED and
            vb[c]["verdict"] in DECIDED]  # fmt: skip
    print(f"{len(both)} claims decided in both sweeps, {len(conflicts)} with opposite verdicts"
          + (f": {', '.join(conflicts)}" if conflicts else ""))  # fmt: skip
    sets = {"A": sets_of(args.a, args.scale), "B": sets_of(args.b, args.scale)}
    missing = [k for k, t in sets.items() if t is None]
    if missing:
        print(f"no noise table in {', '.join(missing)}: the margins cannot be checked (make "
              f"{NOISE_TARGET})")  # fmt: skip
        return 1
    wide = [f"{k} {x}" for k, v in (("A", va), ("B", vb)) for x in outside_margins(v, sets)]
    n_sets = sum(len(t.drop_duplicates("run")) for t in sets.values())
    print(f"{n_sets} sets of identical runs in the two sweeps, {len(wide)} outside the margin a "
          "decided verdict used" + (":" if wide else ""))  # fmt: skip
    for line in wide:
        print(f"  {line}")
    return 1 if conflicts or wide else 0


if __name__ == "__main__":
    sys.exit(main())
