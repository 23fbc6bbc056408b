"""O1-O4 (ours, beyond the paper): the optimisations the papers point at, one at a time.

Each ladder (run/sweep/matrix.py `ladder`) adds one change to the step before, step 0 being the
faithful run; O4 varies the optimizer instead (its AdamW cell is O3's faithful run, a row of
both). A run is a step of an experiment when its name is one of the experiment's cells at the
run's seed, so every repeat counts. Speed-ups are over the median of the step before and of step
0 at the same GPU count: per run in `table`, on medians in `compact` (its min-max spans both
steps' spreads). No paper numbers, no self-check (claims.yaml `origin: ours`). Where a ladder's
faithful and last steps were both profiled (PROFILER=torch|nsys), `profile-diff` holds their
change (profiles/diff.py run_diff), one line of it in the notes.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis import common as c
from analysis import draw, draw_optimized, repeats
from analysis.driver import Artifact
from analysis.profiles import ProfileError, diff
from analysis.profiles.diff import PAPER_TOTAL, UnrelatedError
from run import store
from run.sweep import matrix as mx

TARGET, PROFILE_DIFF = draw_optimized.TARGET, draw_optimized.PROFILE_DIFF
TITLE = "The optimisations the papers point at, one change at a time (beyond the paper)"
KEYS = ["experiment", "gpus", "step", "step_label"]
GIB = 1024**3
# the loss after N steps: the mean over the last quarter of the steps (run/llm/metrics.py),
# else, for older runs, the last step's
LOSS_FIELDS = ("tail_loss", "final_loss")
UNITS = {"vision": "images/s", "llm": "tokens/s"}
COLUMNS = ["experiment", "workload", "step", "step_label", "stage", "gpus", "image_size",
           "throughput", "unit", "images_per_s", "tokens_per_s", "speedup_vs_prev",
           "speedup_vs_faithful", "accuracy_pct", "loss", "loss_field", "tokens_trained",
           "optimizer_state_bytes", "optimizer_state_mib", "optimizer_state_8bit_share",
           "htod_bytes_per_image",
           "input_bytes_per_image", "peak_memory_gib", "memory_kind", "status", "reason", "seed",
           "run"]  # fmt: skip
MEASURES = ["throughput", "accuracy_pct", "loss", "peak_memory_gib", "htod_bytes_per_image",
            "input_bytes_per_image", "optimizer_state_mib"]  # fmt: skip
MIB = 1024**2
EIGHT_BIT_SHARE = 0.9  # O4a is judged where at least this share of the adapters is 8-bit
HTOD_FACTOR = 100.0  # O1a's criterion: a cut below it cannot be judged where it cannot happen


def _steps(exp: str, scale: str, matrix: dict[str, Any]) -> list[tuple[dict, int, str, str]]:
    cells = mx.expand(exp, scale, matrix, n_repeats=1).specs
    ladder = mx.ladder(exp, matrix)
    out = []
    if ladder:
        last = len(ladder) - 1
        for spec in cells:
            found = mx.ladder_step(exp, spec, matrix)
            if found is None:
                raise c.AnalysisError(f"{exp}: a cell of the matrix is on no step of its ladder")
            i, label = found
            out.append((spec, i, label, "faithful" if i == 0 else "optimised" if i == last else ""))
        return out
    # no ladder (O4): the step is the value of the axes other than gpus, in the matrix's order
    axes = [k for k in matrix["experiments"][exp].get("vary") or {} if k != "gpus"]
    labels: list[str] = []
    for spec in cells:
        label = "/".join(str(spec[k]) for k in axes) or "faithful"
        labels += [label] if label not in labels else []
        i = labels.index(label)
        out.append((spec, i, label, "faithful" if i == 0 else ""))
    return out


def assign(runs: pd.DataFrame, scale: str, matrix: dict[str, Any] | None = None) -> pd.DataFrame:
    """`runs` with experiment, step, step_label and stage, a row per run and experiment."""
    matrix = matrix or mx.load_matrix()
    if runs.empty:
        return runs.assign(experiment=None, step=None, step_label=None, stage=None)
    seeds = sorted({int(s) for s in runs["seed"].dropna()})
    # a sweep under PROFILER=torch|nsys names its runs with the profiler (-prof_torch)
    profilers = {"none", *(runs["profiler"].dropna() if "profiler" in runs else ())}
    rows = []
    for exp in mx.experiments_for_target(TARGET, matrix):
        by_name = {}
        for spec, i, label, stage in _steps(exp, scale, matrix):
            for s in seeds:  # a repeat is the cell at another seed
                for prof in profilers:
                    by_name[mx.run_name({**spec, "seed": s, "profiler": prof})] = (i, label, stage)
        for _, r in runs.iterrows():
            if r["run"] in by_name:
                i, label, stage = by_name[r["run"]]
                rows.append({**r.to_dict(), "experiment": exp, "step": i, "step_label": label,
                             "stage": stage})  # fmt: skip
    return pd.DataFrame(rows)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(math.nan, df.index)


def measures(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    ok = df["status"] == "ok"
    vision = df["workload"] == "vision"
    df["images_per_s"] = _col(df, "images_per_s").where(vision & ok)
    df["tokens_per_s"] = _col(df, "tokens_per_s").where(~vision & ok)
    df["throughput"] = df["images_per_s"].where(vision, df["tokens_per_s"])
    df["unit"] = df["workload"].map(UNITS)
    df["accuracy_pct"] = _col(df, "final_test_accuracy_pct").where(vision & ok)
    field = next((f for f in LOSS_FIELDS if f in df and df[f].notna().any()), LOSS_FIELDS[-1])
    df["loss"] = _col(df, field).where(~vision & ok)
    df["loss_field"] = [field if v == v else None for v in df["loss"]]
    # packing changes the tokens a step carries: its loss after N steps is read beside this
    df["tokens_trained"] = _col(df, "tokens_trained").where(~vision & ok)
    # the optimizer's state as allocated, on every device (what 8-bit AdamW shrinks even where
    # no GPU peak can be read)
    df["optimizer_state_bytes"] = _col(df, "optimizer_state_bytes").where(~vision & ok)
    df["optimizer_state_mib"] = df["optimizer_state_bytes"] / MIB
    df["optimizer_state_8bit_share"] = _col(df, "optimizer_state_8bit_share").where(~vision & ok)
    for name in ("htod_bytes_per_image", "input_bytes_per_image"):
        df[name] = _col(df, name).where(vision & ok)
    df["peak_memory_gib"] = (_col(df, "peak_memory_bytes") / GIB).where(ok)
    for name in ("memory_kind", "image_size", "error"):
        if name not in df:
            df[name] = None
    df["memory_kind"] = df["memory_kind"].where(ok)
    df["image_size"] = df["image_size"].where(vision)
    df["reason"] = c.reasons(df)
    return df


def waterfall(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["status"] == "ok"].dropna(subset=["throughput"])
    med = ok.groupby(["experiment", "gpus", "step"])["throughput"].median().to_dict()
    prev, first = [], []
    for _, r in df.iterrows():
        e, g, s = r["experiment"], r["gpus"], r["step"]
        prev.append(r["throughput"] / med[(e, g, s - 1)] if (e, g, s - 1) in med else math.nan)
        first.append(r["throughput"] / med[(e, g, 0)] if (e, g, 0) in med else math.nan)
    return df.assign(speedup_vs_prev=prev, speedup_vs_faithful=first)


def per_run(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = waterfall(measures(df))
    df = df.sort_values(["experiment", "gpus", "step", "seed"], kind="stable")
    return df[COLUMNS].reset_index(drop=True)


def table(runs: pd.DataFrame, scale: str) -> pd.DataFrame:
    return per_run(assign(runs, scale))


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """Per experiment, GPU count and step: medians (min-max); a step with no finished run shows
    its status."""
    cols = [*KEYS, "status", "throughput", "unit", "speedup_vs_prev", "speedup_vs_faithful",
            "accuracy_pct", "loss", "htod_bytes_per_image", "input_bytes_per_image",
            "optimizer_state_mib", "peak_memory_gib", "memory_kind"]  # fmt: skip
    if t is None or t.empty:
        return pd.DataFrame(columns=cols)
    keys = [*KEYS, "unit", "memory_kind"]
    ok = t[t["status"] == "ok"]
    med = repeats.collapse(ok[[*keys, "run", *MEASURES]], MEASURES).drop(columns="run")
    cells = t.groupby(KEYS, dropna=False)["status"].agg(draw.status)
    out = cells.rename("status").reset_index().merge(med, on=KEYS, how="left")
    at = {(r["experiment"], r["gpus"], r["step"]): r for _, r in out.iterrows()}
    for name, base in (("speedup_vs_prev", lambda s: s - 1), ("speedup_vs_faithful", lambda s: 0)):
        vals = {"": [], "_min": [], "_max": []}
        for _, r in out.iterrows():
            b = at.get((r["experiment"], r["gpus"], base(r["step"])))
            ok_b = b is not None and b["status"] == "ok" and r["status"] == "ok"
            vals[""].append(r["throughput"] / b["throughput"] if ok_b else math.nan)
            vals["_min"].append(r["throughput_min"] / b["throughput_max"] if ok_b else math.nan)
            vals["_max"].append(r["throughput_max"] / b["throughput_min"] if ok_b else math.nan)
        for suffix, v in vals.items():
            out[name + suffix] = v
    out = out.sort_values(["experiment", "gpus", "step"], kind="stable").reset_index(drop=True)
    values = ["throughput", "speedup_vs_prev", "speedup_vs_faithful", "accuracy_pct", "loss",
              "peak_memory_gib"]  # fmt: skip
    stats = [f"{v}_{s}" for v in values for s in ("min", "max")]
    out["repeats"] = out["repeats"].fillna(0).astype(int)
    out = out[[*cols, *stats, "repeats"]]
    if int(out["repeats"].max()) <= 1:
        out = out.drop(columns=[*stats, "repeats"])
    return out


DIFF_COLUMNS = ["experiment", "gpus", "faithful_run", "optimised_step", "optimised_run",
                *diff.CSV_COLUMNS]  # fmt: skip


def profiled_pairs(t: pd.DataFrame, scale: str | None) -> list[tuple[str, Any, str, str, str]]:
    """(experiment, gpus, last step's label, faithful run, last run) where both were profiled
    (the lowest seed)."""
    if scale is None or t is None or t.empty:
        return []
    ok = t[t["status"] == "ok"].sort_values("seed", kind="stable")
    last = t.groupby("experiment")["step"].max()
    pairs = []
    for (exp, gpus), g in ok.groupby(["experiment", "gpus"], sort=True):
        ends = []
        for step in (0, last[exp]):
            names = [r for r in g.loc[g["step"] == step, "run"]
                     if diff.profiled(store.run_dir(scale, r))]  # fmt: skip
            ends.append(names[0] if names else None)
        if last[exp] > 0 and None not in ends:
            label = g.loc[g["run"] == ends[1], "step_label"].iloc[0]
            pairs.append((exp, gpus, label, ends[0], ends[1]))
    return pairs


def profile_diff(t: pd.DataFrame, scale: str | None) -> tuple[pd.DataFrame, list[str]]:
    frames, lines = [], []
    for exp, gpus, label, a, b in profiled_pairs(t, scale):
        where = f"{exp} at {gpus:g} GPU(s), faithful -> {label}"
        try:
            rows, missing = diff.run_diff(store.run_dir(scale, a), store.run_dir(scale, b))
        except (ProfileError, UnrelatedError) as exc:
            lines.append(f"Profiles of {where} not compared: {exc}")
            continue
        frames.append(rows.assign(experiment=exp, gpus=gpus, faithful_run=a,
                                  optimised_step=label, optimised_run=b))  # fmt: skip
        total = rows[(rows["metric"] == PAPER_TOTAL) & (rows["field"] == "total_s")]
        moved = (
            f"the paper's profiler metrics {total['a'].iloc[0]:.4g} s -> {total['b'].iloc[0]:.4g} s"
            f" ({total['change_pct'].iloc[0]:+.1f}%)"
            if len(total) and total["present"].iloc[0] == "both"
            else "no paper metric on both sides"
        )
        end = " (no time breakdown beside either profile)." if missing else "."
        lines.append(f"Beyond the paper, profiled steps of {where}: {moved}; the top metrics' "
                     f"change is in {TARGET}-{PROFILE_DIFF}.csv{end}")  # fmt: skip
    df = pd.concat(frames, ignore_index=True)[DIFF_COLUMNS] if frames else None
    return (df if df is not None else pd.DataFrame(columns=DIFF_COLUMNS)), lines


def extra(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Written even when empty: a rebuild never leaves an older sweep's pairs behind."""
    return {PROFILE_DIFF: profile_diff(t, runs.attrs.get("scale"))[0]}


def htod_reach(t: pd.DataFrame) -> float | None:
    """The largest cut in bytes per image that upsampling on the device can give at O1's size:
    the faithful input's bytes per image over the stored image's (None without such a pair)."""
    o1 = t[(t["experiment"] == "O1") & (t["status"] == "ok")] if len(t) else t
    if o1.empty or o1["input_bytes_per_image"].isna().all():
        return None
    first = o1[o1["stage"] == "faithful"]["input_bytes_per_image"].median()
    updev = o1[(o1["step"] == 1)]["input_bytes_per_image"].median()
    return float(first / updev) if first == first and updev == updev and updev else None


def gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    """htod, dali_gpu: a GPU; eight_bit_states (O4a); large_images: O1a's 100x possible;
    learned, learned_scenario_b: O1's, O2's runs learned (O1b, O2a)."""
    vision = runs[runs["workload"] == "vision"] if len(runs) else runs
    out: dict[str, str] = {}
    if not c.on_gpu(vision):
        out["htod"] = (
            "no GPU: nothing is copied host-to-device on CPU, so no run records "
            "htod_bytes_per_image (input_bytes_per_image, the batch's bytes, is in the table)"
        )
        out["dali_gpu"] = "no GPU: DALI decodes on the CPU (no `mixed` decoder without a GPU)"
    # O4a: bitsandbytes keeps tensors under 4,096 elements in 32 bits, so a model whose adapters
    # are mostly that small (smoke's tiny llama3) cannot show the 4x smaller 8-bit states
    paged = t[(t["experiment"] == "O4") & (t["step_label"] == "paged_adamw8bit")] if len(t) else t
    share = paged["optimizer_state_8bit_share"].min() if len(paged) else math.nan
    if share == share and share < EIGHT_BIT_SHARE:
        out["eight_bit_states"] = (
            f"only {share:.0%} of the adapters' parameters have 8-bit states: bitsandbytes keeps "
            f"tensors under 4,096 elements in 32 bits, and {1 - share:.0%} of this model's adapter "
            "parameters are in such tensors (none of Llama3-8B's are)"
        )
    reach = htod_reach(t)
    if reach is not None and reach < HTOD_FACTOR:
        size = t.loc[t["experiment"] == "O1", "image_size"].max()
        out["large_images"] = (
            f"at {size:g} px the faithful input is only {reach:.0f}x the stored image's bytes, "
            f"so a {HTOD_FACTOR:.0f}x cut cannot happen (fp32 3-channel images need 81 px or "
            "more; the paper's 500 px give about 3,800x)"
        )

    # Each ladder's accuracy claim rests on its own runs: a ladder whose runs did not learn (O2's
    # smoke cells did not, before the matrix sized them to learn) must not make the other's
    # verdict inconclusive.
    def runs_of(exp: str) -> pd.DataFrame:
        names = set(t.loc[t["experiment"] == exp, "run"]) if len(t) else set()
        return vision[vision["run"].isin(names)] if len(vision) else vision

    out["learned"] = c.not_learned(runs_of("O1"))
    out["learned_scenario_b"] = c.not_learned(runs_of("O2"))
    return {k: v for k, v in out.items() if v}


def notes(runs: pd.DataFrame, t: pd.DataFrame) -> list[str]:
    out = [
        "Beyond the paper: the papers published no numbers for these optimisations; every "
        "step is our own run, beside the faithful run it improves on (step 0)."
    ]
    if len(t) and not c.on_gpu(runs):
        out.append(
            "CPU run: every step runs at tiny scale with gloo ranks on shared cores "
            "(torch.compile with the CPU backend, bf16 autocast on the CPU): the speed-ups say "
            "how this machine responds, not how an H100 node does. peak_memory_gib is host RSS, "
            "not VRAM."
        )
    if len(t) and (t["experiment"] == "O4").any():
        out.append(
            "O4: peak_memory_gib is torch's own peak, which does not see bitsandbytes' paged "
            "(CUDA managed) optimizer states, so the paged run's peak leaves them out; O4a "
            "judges the optimizer states' own bytes (optimizer_state_bytes) instead."
        )
    unsupported = t[t["status"] == "unsupported"] if len(t) else t
    for (e, label), g in unsupported.groupby(["experiment", "step_label"]):
        why = str(g["reason"].iloc[0]).rstrip(".")
        out.append(f"{e} step '{label}' is unsupported here: {why}.")
    return out + profile_diff(t, runs.attrs.get("scale"))[1]


ARTIFACT = Artifact(
    table=table,
    compact=compact,
    keys=KEYS,
    notes=notes,
    gates=gates,
    extra=extra,
    title=TITLE,
    figure=draw_optimized.figure,
)
