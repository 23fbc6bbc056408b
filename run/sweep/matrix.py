"""Expand experiments/matrix.yaml into validated run specs.

python -m run.sweep.matrix --scale smoke            # list every run of every experiment
python -m run.sweep.matrix --scale smoke --exp V3   # the runs of one experiment
python -m run.sweep.matrix --check                    # validate every entry of every scale

Repeats. REPEATS=n runs every run spec n times: repeat k the same spec with seed + k. The seed is
in the run name whenever it is not 0 (`-seed<seed>`), so repeat 0 keeps its name, every repeat is
a run of its own (a killed sweep reruns only the missing ones), and two experiments still share a
repeat whose spec is identical.

Busy repeats. `busy_repeats: k` (a whole number, or a map per scale; at most its repeats): repeats
0..k-1 of each cell run once more beside a busy core (`beside: busy-core`, run name `...-busy`,
run/node/busy.py), after every other repeat, so the cell's spread covers a run beside a load the
machine may meet (issue 38: the noise cells N1/N2).

Ladders. `ladder:` is a list of steps `{step: <label>, <key>: <value>, ...}`: step 0 is the
faithful run, each later step keeps every key of the step before and adds (or changes) its own, so
consecutive steps differ by one change (the waterfall of issue 20); one more axis, crossed with
`vary:`. Its values are scalars, the same in every scale, and a ladder key may be in `fixed` only
as a scalar and in no scale's defaults: so `ladder_step` tells any spec's step without a scale.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from run import settings, yamlfile
from run.errors import UserError
from run.node import busy
from run.program import program
from run.sweep import schema
from run.sweep.schema import FROM_SCALE
from run.sweep.workloads import WORKLOADS

REPEATS_ENV = "REPEATS"
STEP = "step"  # a ladder step's label: not a spec key


class MatrixError(UserError):
    """A matrix entry, scale or experiment id that cannot be used."""


@dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    source: str
    target: str
    workload: str
    # every repeat's spec: first each cell's repeat 0, then each cell's repeat 1, and so on
    specs: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    repeats: int = 1
    busy_repeats: int = 0  # repeats that also run beside a busy core (after all the others)

    @property
    def run_names(self) -> list[str]:
        return [run_name(s) for s in self.specs]


def matrix_file() -> Path:
    """MATRIX_FILE, read when asked (tests point it at a small one)."""
    return settings.path("MATRIX_FILE")


def load_matrix(path: Path | None = None) -> dict[str, Any]:
    """The matrix, read strictly (run/yamlfile.py) and with every key checked."""
    matrix = yamlfile.load(path or matrix_file(), MatrixError)
    check_keys(matrix)
    return matrix


def check_keys(matrix: Any) -> None:
    """Every key at every level is one the matrix knows (run/sweep/schema.py), else one line."""
    try:
        schema.check(matrix, WORKLOADS)
    except ValueError as exc:
        raise MatrixError(str(exc)) from None


def scales(matrix: dict[str, Any] | None = None) -> list[str]:
    return list((matrix or load_matrix())["scales"])


def scale_device(scale: str, matrix: dict[str, Any] | None = None) -> str:
    """`gpu` for scales that must never train on a CPU (quick, paper), else `any`."""
    prof = (matrix or load_matrix())["scales"].get(scale)
    if prof is None:
        raise MatrixError(f"unknown scale '{scale}'")
    device = prof.get("device", "any")
    if device not in ("gpu", "any"):
        raise MatrixError(f"scale '{scale}': device {device!r} is not one of gpu, any")
    return device


def _per_scale(value: Any, scale: str, known: list[str]) -> Any:
    """A value may be given per scale as {smoke: .., quick: .., paper: ..}."""
    if isinstance(value, dict) and value and set(value) <= set(known):
        if scale not in value:
            raise MatrixError(f"value {value} has no entry for scale '{scale}'")
        return value[scale]
    return value


def run_name(spec: dict[str, Any]) -> str:
    return WORKLOADS[spec["workload"]].run_name(spec)


def _setting(name: str) -> Any:
    try:
        return settings.value(name)
    except settings.SettingError as exc:
        raise MatrixError(str(exc)) from None


def repeats() -> int:
    """REPEATS (default 1), read here only, so the sweep, the plan and the listing agree on it."""
    return _setting(REPEATS_ENV)


def repeat_spec(spec: dict[str, Any], k: int) -> dict[str, Any]:
    """Repeat k of a canonical spec: the same spec, seed + k (repeat 0 is the spec itself)."""
    if k == 0:
        return spec
    return {**spec, "seed": spec["seed"] + k}


def expand(
    exp_id: str, scale: str, matrix: dict[str, Any] | None = None, n_repeats: int | None = None
) -> Experiment:
    """All resolved, validated, canonical specs of one experiment under one scale, each cell
    `n_repeats` times (default REPEATS), or the experiment's own `repeats` when that is more."""
    n = repeats() if n_repeats is None else n_repeats
    if n < 1:
        raise MatrixError(f"{REPEATS_ENV} must be a whole number >= 1, got {n!r}")
    matrix = matrix or load_matrix()
    known = scales(matrix)
    if scale not in known:
        raise MatrixError(f"unknown scale '{scale}' (known: {', '.join(known)})")
    exps = matrix["experiments"]
    if exp_id not in exps:
        raise MatrixError(f"unknown experiment '{exp_id}' (known: {', '.join(exps)})")
    entry = exps[exp_id]
    # an experiment may ask for more repeats than REPEATS (the noise cells N1/N2 run three)
    own = entry.get("repeats", 1)
    if not isinstance(own, int) or isinstance(own, bool) or own < 1:
        raise MatrixError(f"{exp_id}: repeats must be a whole number >= 1, got {own!r}")
    n = max(n, own)
    workload = entry["workload"]
    if workload not in WORKLOADS:
        raise MatrixError(f"{exp_id}: unknown workload '{workload}'")
    wl = WORKLOADS[workload]
    prof = matrix["scales"][scale]
    n_busy = _per_scale(entry.get("busy_repeats", 0), scale, known)
    if not isinstance(n_busy, int) or isinstance(n_busy, bool) or not 0 <= n_busy <= n:
        raise MatrixError(
            f"{exp_id}: busy_repeats must be a whole number from 0 to its repeats ({n}), "
            f"got {n_busy!r}"
        )

    base = dict(wl.defaults)
    base.update(prof.get(workload, {}))
    base["workload"] = workload
    for key, value in (entry.get("fixed") or {}).items():
        base[key] = _per_scale(value, scale, known)
        if base[key] == FROM_SCALE:
            base[key] = _from_scale(exp_id, key, scale, prof)

    axes = []
    for key, values in (entry.get("vary") or {}).items():
        values = _per_scale(values, scale, known)
        if values == FROM_SCALE:
            values = _from_scale(exp_id, key, scale, prof)
        if not isinstance(values, list) or not values:
            raise MatrixError(f"{exp_id}: axis '{key}' must be a non-empty list, got {values!r}")
        axes.append([(key, v) for v in values])

    steps = _ladder_steps(exp_id, entry, matrix)
    specs: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*axes):
        # the ladder innermost: a sweep cut short has whole waterfalls, not one step of each
        done: list[tuple[dict[str, Any], str]] = []  # this combination's steps so far
        for label, overlay in steps or [("", {})]:
            spec = dict(base)
            spec.update(combo)
            spec.update(overlay)
            where = f"{exp_id} ({scale}, ladder step '{label}')" if label else f"{exp_id} ({scale})"
            spec = wl.canonical(_valid(wl, spec, where))
            same = next((lab for s, lab in done if s == spec), None)
            if same is not None:
                raise MatrixError(f"{where}: changes nothing from step '{same}' (the same run)")
            done.append((spec, label))
            specs.setdefault(run_name(spec), spec)
    # Repeats after all cells, so that a sweep cut short has every cell once before any twice.
    # By name, as above: a repeat identical to another cell's spec (seeds 0 and 1 both in the
    # matrix) is one run.
    cells = list(specs.values())
    for k in range(1, n):
        for spec in cells:
            rep = repeat_spec(spec, k)
            specs.setdefault(run_name(rep), rep)
    # Then the busy repeats, last: in the sweep's order they run with the last repeat, at its end.
    for k in range(n_busy):
        for spec in cells:
            rep = {**repeat_spec(spec, k), busy.BESIDE: busy.BUSY_CORE}
            _valid(wl, rep, f"{exp_id} ({scale}), busy repeat {k}")
            specs.setdefault(run_name(rep), rep)
    return Experiment(
        id=exp_id,
        title=entry["title"],
        source=entry["source"],
        target=entry["target"],
        workload=workload,
        specs=tuple(specs.values()),
        repeats=n,
        busy_repeats=n_busy,
    )


def _valid(wl: Any, spec: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        wl.validate(spec)
    except ValueError as exc:
        raise MatrixError(f"{where}: {exc}") from exc
    return spec


def _from_scale(exp_id: str, key: str, scale: str, prof: dict[str, Any]) -> Any:
    if key not in prof:
        raise MatrixError(f"{exp_id}: '{key}: {FROM_SCALE}', but scale '{scale}' sets no {key}")
    return prof[key]


def _ladder_steps(
    exp_id: str, entry: dict[str, Any], matrix: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The entry's ladder as (label, cumulative overlay), checked; [] without one."""
    raw = entry.get("ladder")
    if raw is None:
        return []
    if not isinstance(raw, list) or not raw:
        raise MatrixError(f"{exp_id}: ladder must be a non-empty list of steps, got {raw!r}")
    workload = entry.get("workload")
    wl = WORKLOADS.get(workload)
    if wl is None:
        raise MatrixError(f"{exp_id}: unknown workload '{workload}'")
    vary = set(entry.get("vary") or {})
    fixed = entry.get("fixed") or {}
    known = scales(matrix)
    out: list[tuple[str, dict[str, Any]]] = []
    overlay: dict[str, Any] = {}
    for i, step in enumerate(raw):
        if not isinstance(step, dict) or not isinstance(step.get(STEP), str) or not step[STEP]:
            raise MatrixError(
                f"{exp_id}: ladder step {i} needs a label (step: <name>), got {step!r}"
            )
        label = step[STEP]
        where = f"{exp_id}: ladder step {i} '{label}'"
        if label in (lab for lab, _ in out):
            raise MatrixError(f"{where}: the label is used by an earlier step")
        keys = {k: v for k, v in step.items() if k != STEP}
        unknown = sorted(set(keys) - set(wl.defaults))
        if unknown:
            raise MatrixError(f"{where}: unknown {workload} spec key(s): {', '.join(unknown)}")
        for key, value in keys.items():
            if key in vary or key in ("seed", "workload"):
                raise MatrixError(f"{where}: '{key}' cannot be a ladder key (vary or seed owns it)")
            if isinstance(value, (dict, list)):
                raise MatrixError(f"{where}: {key}={value!r} must be one value for every scale")
            if (
                isinstance(fixed.get(key), dict)
                or fixed.get(key) == FROM_SCALE
                or any(key in (matrix["scales"][p].get(workload) or {}) for p in known)
            ):
                raise MatrixError(
                    f"{where}: '{key}' is set per scale elsewhere, so its faithful value is unknown"
                )
        if i > 0 and not keys:
            raise MatrixError(f"{where}: changes nothing (the step sets no key)")
        overlay = {**overlay, **keys}
        out.append((label, overlay))
    return out


def ladder(exp_id: str, matrix: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(step label, cumulative overlay) of an experiment's ladder, in order; [] when it has none."""
    matrix = matrix or load_matrix()
    entry = matrix["experiments"].get(exp_id)
    if entry is None:
        raise MatrixError(f"unknown experiment '{exp_id}'")
    return _ladder_steps(exp_id, entry, matrix)


def ladder_step(
    exp_id: str, spec: dict[str, Any], matrix: dict[str, Any] | None = None
) -> tuple[int, str] | None:
    """Which step of the experiment's ladder `spec` is, as (index, label), by the values of every
    key the ladder sets (a key not set yet holds its faithful value: the entry's `fixed`, else the
    workload's default); None without a ladder or when the spec is on no step. A repeat's seed
    plays no part."""
    matrix = matrix or load_matrix()
    steps = ladder(exp_id, matrix)
    if not steps:
        return None
    entry = matrix["experiments"][exp_id]
    wl = WORKLOADS[entry["workload"]]
    faithful = {**wl.defaults, **(entry.get("fixed") or {})}
    keys = steps[-1][1].keys()
    for i, (label, overlay) in enumerate(steps):
        # through canonical() as expand's specs went: a faithful max_seq_len of 0 is the
        # model's cap in the spec
        want = wl.canonical({**spec, **{k: overlay.get(k, faithful.get(k)) for k in keys}})
        if all(spec.get(k) == want.get(k) for k in keys):
            return i, label
    return None


def profiler_override() -> str | None:
    """PROFILER (None when unset): it overrides every spec's."""
    return _setting("PROFILER")


def resolve_profiler(spec: dict[str, Any], override: str | None, info: dict[str, Any]) -> dict:
    """PROFILER from the environment overrides the matrix; `auto` picks nsys when installed."""
    spec = dict(spec)
    choice = override or spec.get("profiler", "none")
    if choice == "auto":
        choice = "nsys" if info.get("nsys") else "torch"
    if choice == "nsys" and not info.get("nsys"):
        raise MatrixError("PROFILER=nsys but nsys is not on the PATH (try PROFILER=torch)")
    spec["profiler"] = choice
    return spec


def experiments_for_target(target: str, matrix: dict[str, Any] | None = None) -> list[str]:
    matrix = matrix or load_matrix()
    ids = [k for k, e in matrix["experiments"].items() if e["target"] == target]
    if not ids:
        targets = sorted(e["target"] for e in matrix["experiments"].values())
        raise MatrixError(f"unknown target '{target}' (known: {', '.join(targets)})")
    return ids


def check_all(matrix: dict[str, Any] | None = None) -> tuple[int, int]:
    """Validate every experiment under every scale, and that a run name never stands for two
    specs within a scale (experiments share runs by name). Returns (entries, specs) checked."""
    if not matrix:
        matrix = load_matrix()  # checks its keys as it loads
    else:
        check_keys(matrix)
    entries = specs_checked = 0
    for scale in scales(matrix):
        scale_device(scale, matrix)
        by_name: dict[str, dict[str, Any]] = {}
        for exp_id in matrix["experiments"]:
            exp = expand(exp_id, scale, matrix)
            entries += 1
            for spec in exp.specs:
                name = run_name(spec)
                if name in by_name and by_name[name] != spec:
                    raise MatrixError(f"run name {name} stands for two different specs ({scale})")
                by_name[name] = spec
                specs_checked += 1
    return entries, specs_checked


@program()
def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scale", default="smoke")
    ap.add_argument("--exp", action="append", help="experiment id (repeatable); default all")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        entries, n = check_all()
        print(f"matrix OK: {entries} experiment entries, {n} run specs checked")
        return 0
    matrix = load_matrix()
    for exp_id in args.exp or list(matrix["experiments"]):
        exp = expand(exp_id, args.scale, matrix)
        times = f" ({exp.repeats} repeats per cell)" if exp.repeats > 1 else ""
        if exp.busy_repeats:
            times += f" (+{exp.busy_repeats} per cell beside a busy core)"
        print(f"{exp.id} [{exp.target}] {exp.title}: {len(exp.specs)} runs{times}")
        for name in exp.run_names:
            print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
