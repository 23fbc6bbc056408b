"""What experiments/matrix.yaml may hold, level by level: a key beside these is a typo (`varry:`
for `vary:` would silently drop an axis). run/sweep/matrix.py refuses such a matrix with the one
line `check` raises.

Spec keys (a scale's workload block, `fixed`, `vary`, ladder steps) are the workload's own,
checked by its validate() when the specs are expanded; profiling windows by run/node/profiling.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FROM_SCALE = "from-scale"  # a fixed value or an axis taken from the scale's own key
TOP_KEYS = ("scales", "experiments")
SCALE_KEYS = (
    "description",
    "device",
    "gpus",
    "profiling",
)  # + a block per workload, + from-scale keys
EXPERIMENT_KEYS = (
    "title",
    "source",
    "target",
    "workload",
    "fixed",
    "vary",
    "ladder",
    "repeats",
    "busy_repeats",
)
REQUIRED_EXPERIMENT_KEYS = ("title", "source", "target", "workload")


def _unknown(where: str, keys: Iterable[str], known: Iterable[str]) -> None:
    unknown = sorted(set(keys) - set(known))
    if unknown:
        listed = ", ".join(f"'{k}'" for k in unknown)
        raise ValueError(f"{where}: unknown key {listed} (known: {', '.join(sorted(set(known)))})")


def check(matrix: Any, workloads: Iterable[str]) -> None:
    """Raise ValueError naming the first key, at any level, that the matrix does not know."""
    workloads = list(workloads)
    if not isinstance(matrix, dict):
        raise ValueError(f"the matrix must be a mapping of {', '.join(TOP_KEYS)}")
    _unknown("matrix", matrix, TOP_KEYS)
    for key in TOP_KEYS:
        if not isinstance(matrix.get(key), dict) or not matrix[key]:
            raise ValueError(f"matrix: '{key}' must be a non-empty mapping")
    from_scale = set()
    for exp_id, entry in matrix["experiments"].items():
        if not isinstance(entry, dict):
            raise ValueError(f"{exp_id}: an experiment must be a mapping of its keys")
        _unknown(exp_id, entry, EXPERIMENT_KEYS)
        missing = [k for k in REQUIRED_EXPERIMENT_KEYS if k not in entry]
        if missing:
            raise ValueError(f"{exp_id}: missing key(s) {', '.join(missing)}")
        for block in ("fixed", "vary"):
            for key, value in (entry.get(block) or {}).items():
                values = value.values() if isinstance(value, dict) else [value]
                from_scale |= {key for v in values if v == FROM_SCALE}
    for name, prof in matrix["scales"].items():
        where = f"scale '{name}'"
        if not isinstance(prof, dict):
            raise ValueError(f"{where} must be a mapping of its keys")
        _unknown(where, prof, [*SCALE_KEYS, *workloads, *from_scale])
        _unknown(f"{where}: profiling", prof.get("profiling") or {}, workloads)
