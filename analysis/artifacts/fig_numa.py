"""V11 (J 4.3.1, the paper's untested hypothesis): Scenario B DataLoader with NUMA binding off
and on, by GPU count, with each rank's node (from the runs' provenance, run/node/numa.py).

Binding can only change anything where the machine has more than one NUMA node: on one node V11a
is not measured, with that reason. The paper never ran this: no paper() table, no self-check.
"""

from __future__ import annotations

import pandas as pd

from analysis import common as c
from analysis import draw
from analysis.driver import Artifact
from run import store

KEYS = ["numa"]
NUMA_LABELS = {"off": "unbound", "bind": "bound (numactl)"}


def provenance_of(run: str, scale: str) -> tuple[dict, int]:
    """The run's NUMA plan (absent on older runs) and its machine's NUMA node count."""
    prov = store.read_json(store.run_dir(scale, run) / store.PROVENANCE)
    return prov.get("numa") or {}, len(prov.get("hardware", {}).get("numa_nodes") or [None])


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    rows = []
    for _, r in runs.iterrows():
        plan, machine_nodes = provenance_of(r["run"], scale)
        nodes = ",".join(str(x["node"]) for x in plan.get("ranks", []))
        rows.append({
            "numa": r["numa"], "binding": NUMA_LABELS.get(r["numa"], r["numa"]),
            "gpus": r["gpus"], "total_time_s": r.get("total_time_s"),
            "bound": bool(plan.get("bound")), "rank_nodes": nodes,
            "machine_nodes": machine_nodes,
            "why": plan.get("why", ""), "status": r["status"], "run": r["run"],
        })  # fmt: skip
    df = pd.DataFrame(rows)
    return df.sort_values(["numa", "gpus"], ascending=[False, True]) if len(df) else df


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Binding as rows, total time per GPU count as columns."""
    return c.pivot(t, ["binding"], "gpus", {"total_time_s": lambda g: f"{c.gpus_label(g)} [s]"})


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = []
    for _, r in t[t["bound"]].iterrows() if len(t) else []:
        out.append(f"{r['run']}: ranks on NUMA node(s) {r['rank_nodes']} ({r['why']}).")
    return out


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    """`multi_numa`: the machine has more than one NUMA node and the bound runs were bound."""
    if not len(t):
        return {"multi_numa": "no finished runs"}
    nodes = int(t["machine_nodes"].min())
    if nodes < 2:
        return {"multi_numa": f"{nodes} NUMA node on this machine: binding cannot change anything"}
    if not t[t["numa"] == "bind"]["bound"].all():
        return {"multi_numa": "the numa=bind runs were not bound (numactl missing)"}
    return {"multi_numa": ""}


def not_compared(drawn: list[str], meta: dict) -> str:
    """One bar per group is no comparison: say why the other is absent."""
    why = (meta.get("gates") or {}).get("multi_numa", "")
    return f"binding not compared: {why or 'one binding only'}" if len(drawn) < 2 or why else ""


figure = draw.time_bars_figure(
    "binding", "NUMA binding of DataLoader ranks ({runs})", dali=False, note=not_compared
)


ARTIFACT = Artifact(
    table=table, compact=compact, keys=KEYS, notes=notes, gates=gates, figure=figure
)
