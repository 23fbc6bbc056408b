"""What the artifact modules share: an experiment's runs, speed-ups, compact tables, gates.

The contract an artifact module follows, and the files it ends up in, are analysis/driver.py's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import repeats
from run import store
from run.errors import UserError
from run.sweep import matrix as mx

REFERENCE_DIR = store.REFERENCE_DIR


class AnalysisError(UserError):
    """Something an artifact needs is missing; the message says what to run."""


def sweep_record(exp_id: str, scale: str) -> dict[str, Any]:
    """The sweep's record of one experiment; a missing or unreadable one is an AnalysisError."""
    path = store.sweep_file(scale, exp_id)
    record, why = read_sweep_record(path) if path.is_file() else (None, "")
    if record is not None:
        return record
    target = mx.load_matrix()["experiments"][exp_id]["target"]  # for the line
    if not why:
        raise AnalysisError(
            f"{exp_id} has not been run for scale '{scale}' ({path} missing): "
            f"run `make {target} PROFILE={scale}`"
        )
    # make counts a record newer than the sources as up to date: it must go before make reruns it
    raise AnalysisError(
        f"{path} is not a readable sweep record ({why}): rerun the sweep, "
        f"`rm {path} && make {target} PROFILE={scale}`"
    )


def read_sweep_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A sweep record (an object whose "runs" each name a run), or None and why not, in a line.
    The one reader of sweeps/*.json for the analysis and the report."""
    try:
        record = store.read_json(path)
    except (OSError, ValueError) as exc:
        return None, one_line(f"{exc.__class__.__name__}: {exc}")
    runs = record.get("runs") if isinstance(record, dict) else None
    if not isinstance(runs, list):
        return None, "no list of runs"
    if not all(isinstance(e, dict) and isinstance(e.get("run"), str) for e in runs):
        return None, "a run entry without a run name"
    return record, ""


def one_line(text: str) -> str:
    return " ".join(str(text).split())


# what was named on stderr already, by key: a run shared by several experiments, or a folder the
# report reads more than once, is named once per process
_WARNED: set[str] = set()


def warn_once(line: str, key: str | None = None) -> None:
    """`warning: <line>` on stderr, unless the same key (default: the line) was named already."""
    line = one_line(line)
    if (key or line) not in _WARNED:
        _WARNED.add(key or line)
        print(f"warning: {line}", file=sys.stderr)


def unreadable_why(summary: dict[str, Any]) -> str:
    """Why store.read_summary could not read a run, in a line."""
    return one_line(str(summary.get("why") or summary.get("error") or ""))


def experiment_runs(exp_id: str, scale: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """One row per run the sweep recorded: spec fields, then summary fields. And skipped cells.

    An unreadable run (store.read_summary) is left out, named once on stderr; the frame's
    attrs["left_out"] lists them, for the table's notes."""
    record = sweep_record(exp_id, scale)
    rows, bad = [], []
    for entry in record["runs"]:
        d = store.run_dir(scale, entry["run"])
        summary = store.read_summary(d)
        if summary is None:
            raise AnalysisError(f"run {entry['run']} is listed by the {exp_id} sweep but missing")
        if store.is_unreadable(summary):
            warn_once(  # once: a run shared by several experiments is named once
                f"{entry['run']}: unreadable ({unreadable_why(summary)}), left out; the next "
                f"sweep runs it again (`python -m run.sweep --scale {scale} --exp {exp_id}`)",
                key=str(d),
            )
            bad.append(entry["run"])
            continue
        # read_summary has checked that spec.json is an object
        row: dict[str, Any] = dict(store.read_json(d / store.SPEC))
        row.update({k: v for k, v in summary.items() if k != "runtime"})
        row["run"] = entry["run"]
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["left_out"] = bad
    skipped = record.get("skipped")
    return df, skipped if isinstance(skipped, list) else []


def epochs_of(run: str, scale: str) -> list[dict[str, Any]]:
    return store.read_jsonl(store.run_dir(scale, run) / store.EPOCHS)


def paper_table(name: str) -> pd.DataFrame:
    return pd.read_csv(REFERENCE_DIR / name)


def on_gpu(df: pd.DataFrame) -> bool:
    return bool(len(df)) and "device" in df and bool((df["device"].fillna("cpu") != "cpu").any())


def cpu_note(text: str) -> Callable[[pd.DataFrame, pd.DataFrame], list[str]]:
    """An artifact's notes: `text` where the runs had no GPU."""
    return lambda runs, t: [] if on_gpu(runs) else [text]


def gpu_gate(why: str) -> Callable[[pd.DataFrame, pd.DataFrame], dict[str, str]]:
    """An artifact's gates: `gpu` fails with `why` where the runs had no GPU."""
    return lambda runs, t: {"gpu": "" if on_gpu(runs) else why}


def ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if len(df) else df


def speedups(
    df: pd.DataFrame, by: list[str], time_col: str = "total_time_s", suffix: str = ""
) -> pd.DataFrame:
    """Add speed-up vs the 1-GPU run of the same group and efficiency = speed-up / GPUs
    (`speedup_vs_1gpu<suffix>`, `efficiency_pct<suffix>`).

    The 1-GPU run of a strategy is the shared ddp_ds run (one rank does the same work under
    every strategy), so for V1 the baseline is looked up without the strategy column. With
    repeats (REPEATS=n) the baseline is the median of the 1-GPU repeats, so each repeat's
    speed-up is measured against the same time. Where the times have `_lo`/`_hi` columns (the
    within-run spread of a steady-state time), the speed-up and efficiency get the range of the
    run's own time (the 1-GPU time's spread is the margin's, analysis/noise.py).
    """
    df = df.copy()
    base_keys = [k for k in by if k != "strategy"]
    ones = df[(df["gpus"] == 1) & (df["status"] == "ok")]
    spread = f"{time_col}_lo" in df and f"{time_col}_hi" in df
    cols = [time_col, *([f"{time_col}_lo", f"{time_col}_hi"] if spread else [])]
    if base_keys:
        med = ones.groupby(base_keys, dropna=False)[cols].median()
        base = {(k if isinstance(k, tuple) else (k,)): v for k, v in med.iterrows()}
    else:
        base = {(): ones[cols].median()} if len(ones) else {}
    sp, lo, hi = [], [], []
    for _, r in df.iterrows():
        b = base.get(tuple(r[k] for k in base_keys))
        good = r["status"] == "ok" and b is not None and _num(b[time_col]) and _num(r[time_col])
        sp.append(b[time_col] / r[time_col] if good else None)
        ends = (
            good
            and spread
            and all(_num(x) for x in (b[cols[1]], b[cols[2]], r[cols[1]], r[cols[2]]))
        )
        if ends and r["gpus"] == 1:  # the baseline against itself: no spread to speak of
            lo.append(sp[-1])
            hi.append(sp[-1])
            continue
        # the run's own spread only: two speed-ups at one GPU count share the 1-GPU time, and a
        # speed-up set against a constant has the 1-rank run-to-run spread in its margin
        lo.append(b[time_col] / r[cols[2]] if ends else None)
        hi.append(b[time_col] / r[cols[1]] if ends else None)
    for name, vals in (("", sp), *((("_lo", lo), ("_hi", hi)) if spread else ())):
        df[f"speedup_vs_1gpu{suffix}{name}"] = vals
        df[f"efficiency_pct{suffix}{name}"] = [
            (100.0 * s / g) if s is not None and s == s else None
            for s, g in zip(vals, df["gpus"], strict=True)
        ]
    return df


def _num(v: Any) -> bool:
    """A usable positive number (not None, NaN or 0)."""
    return v is not None and v == v and bool(v)


# ---------------------------------------------------------------- LLM artifacts (L*)
def llm_cpu_notes(df: pd.DataFrame) -> list[str]:
    """What differs from the paper when LLM runs ran without a GPU, from the runs' own fields."""
    if on_gpu(df) or not len(df):
        return []
    ok = ok_runs(df)
    models = sorted(set(ok.get("model", pd.Series(dtype=str)).dropna()))
    tokenizers = sorted(set(ok.get("tokenizer", pd.Series(dtype=str)).dropna()))
    threads = ", ".join(
        str(int(v)) for v in sorted(set(ok.get("cpu_threads_per_rank", pd.Series()).dropna()))
    )
    bpe = " (one token per byte: sequences are about 4x longer than with Llama3's BPE)"
    per_rank = f", {threads} intra-op thread(s) per rank (one core stands for one GPU)"
    return [
        f"CPU run: model {', '.join(models) or '?'} (not Llama3-8B), tokenizer "
        f"{', '.join(tokenizers) or '?'}{bpe if 'bytes' in tokenizers else ''}; synthetic data "
        "sets of the paper's formats. Times show how the pipeline behaves, not how an 8B model "
        "does on H100s.",
        f"CPU run: the 'GPUs' are gloo ranks (torchrun) on the machine's shared cores"
        f"{per_rank if threads else ''}; torchtune's distributed recipes ran with CPU shims "
        "(run/llm/compat.py). Other jobs on the same cores add noise to every time.",
    ]


PAPER_TRAIN_IMAGES = 60_000


# ---------------------------------------------------------------- the artifact contract's helpers
# below this a vision run has not learned the digits: its losses decide nothing
LEARNED_ACC_PCT = 80.0


def compact(
    t: pd.DataFrame,
    keys: list[str],
    values: list[str],
    order: dict[str, Sequence[Any]] | None = None,
) -> pd.DataFrame:
    """The report's table: one row per `keys` group of finished runs, each value the median over
    repeats (analysis.repeats.collapse), with `<value>_min`/`<value>_max` and `repeats` when a
    group has more than one run."""
    ok = ok_runs(t) if "status" in t else t
    if ok.empty:
        return pd.DataFrame(columns=[*keys, *values])
    out = repeats.collapse(ok[[*keys, *values]], values)
    out = out.sort_values(keys, kind="stable").reset_index(drop=True)
    stats = [f"{v}_{s}" for s in ("min", "max") for v in values]
    out = out[[*keys, *values, *stats, "repeats"]]
    if int(out["repeats"].max()) <= 1:
        out = out.drop(columns=[*stats, "repeats"])
    for col, vals in (order or {}).items():
        out = out.assign(_o=out[col].map(lambda v, vals=vals: vals.index(v) if v in vals else 99))
        out = out.sort_values([k if k != col else "_o" for k in keys]).drop(columns="_o")
    return out.reset_index(drop=True)


def not_learned(runs: pd.DataFrame) -> str:
    """Why these vision runs' losses and accuracies decide nothing ("" when every run learned)."""
    ok = ok_runs(runs)
    if ok.empty or "final_test_accuracy_pct" not in ok:
        return ""
    acc = ok["final_test_accuracy_pct"].dropna()
    if acc.empty or acc.min() >= LEARNED_ACC_PCT:
        return ""
    return (
        f"the model did not learn: final test accuracy {acc.min():.0f}-{acc.max():.0f} % "
        f"(a run must reach {LEARNED_ACC_PCT:.0f} %)"
    )


def learning_gates(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    """The gates of a vision claim on losses or accuracies: the runs learned, on the paper's data."""
    return {"learned": not_learned(runs), "paper_data": not_paper_data(runs)}


def not_paper_data(runs: pd.DataFrame) -> str:
    """Why accuracies cannot be set against the paper's 98-99.5 % ("" when they can): only runs
    that trained on the whole MNIST training set can (the smoke scale trains on a few hundred
    images for 1-2 epochs, where MobileNetV2 is still near chance)."""
    ok = ok_runs(runs)
    why = "accuracy thresholds are the paper's for MNIST; "
    if not len(ok):
        return why + "no finished runs"
    if bool(((ok["dataset"] == "mnist") & (ok["train_images"] >= PAPER_TRAIN_IMAGES)).all()):
        return ""
    return why + (
        f"not comparable: these runs trained on {int(ok['train_images'].min())} "
        f"{ok['dataset'].iloc[0]} images for {int(ok['epochs'].max())} epoch(s), the paper on "
        f"{PAPER_TRAIN_IMAGES:,} MNIST images"
    )


# ---------------------------------------------------------------- compact tables shared by artifacts
def pivot(
    t: pd.DataFrame,
    keys: Sequence[str],
    column: str,
    values: dict[str, Callable[[Any], str | None]],
    order: Sequence[Any] | None = None,
    rows: dict[str, list[Any]] | None = None,
    fill_status: bool = False,
) -> pd.DataFrame:
    """`keys` as rows, a column per value of `column` (in `order`, else sorted) for each of
    `values` (value -> the column's name, None: left out), each as compact() makes it.
    `fill_status`: a cell none of whose runs finished holds their status, as the paper's panels
    do (L5, L6, L8). `rows`: key -> its values in the rows' order."""
    keys = list(keys)
    cell = [*keys, column]
    if not fill_status:
        long = compact(t, cell, list(values))
    elif t.empty or column not in t:
        return pd.DataFrame(columns=keys)
    else:
        status = (
            t.groupby(cell, dropna=False)["status"]
            .agg(lambda s: "/".join(sorted(set(s.dropna().astype(str)) - {"ok"})) or None)
            .rename("_status")
            .reset_index()
        )
        long = status.merge(compact(t.dropna(subset=list(values)), cell, list(values)), on=cell,
                            how="left")  # fmt: skip
        for v in values:
            long[v] = long[v].astype(object).where(long[v].notna(), long["_status"])
            for s in (f"{v}_min", f"{v}_max"):
                if s in long:  # object like the value beside them
                    long[s] = long[s].astype(object)
    out = long[keys].drop_duplicates().reset_index(drop=True)
    if long.empty:
        return out
    have = list(long[column].unique())
    xs = [x for x in order if x in have] if order is not None else sorted(have)
    for v, name in values.items():
        for x in xs:
            col = name(x)
            if col is None:
                continue
            part = long[long[column] == x]
            stats = [s for s in (f"{v}_min", f"{v}_max") if s in part]
            part = part[[*keys, v, *stats]].rename(
                columns={v: col, **{s: col + s[len(v) :] for s in stats}}
            )
            out = out.merge(part, on=keys, how="left")
    if "repeats" in long:
        n = long.groupby(keys, dropna=False)["repeats"].max().reset_index()
        out = out.merge(n, on=keys, how="left")
    if rows:
        rank = [out[k].map(lambda v, r=rows[k]: r.index(v) if v in r else len(r))
                if k in rows else out[k] for k in keys]  # fmt: skip
        out = out.iloc[
            pd.DataFrame(dict(enumerate(rank))).sort_values(list(range(len(keys)))).index
        ]
    return out.reset_index(drop=True)


def reasons(df: pd.DataFrame) -> list[str | None]:
    """The first clause of a run's error ("QAT needs several devices"); summary.json keeps it all."""
    return [
        str(e).split(":")[0] if s != "ok" and isinstance(e, str) else None
        for e, s in zip(df["error"], df["status"], strict=True)
    ]


def gpus_label(g: float) -> str:
    """2 -> '2 GPUs' (a column name of the compact tables)."""
    return f"{int(g)} GPU{'s' if int(g) > 1 else ''}"


def real_data_gate(runs: pd.DataFrame, t: pd.DataFrame) -> dict[str, str]:
    return {"real_data": not_real_data(runs)}


def not_real_data(runs: pd.DataFrame) -> str:
    """Why a claim about the paper's data sets (their lengths, their sizes) cannot be judged on
    these LLM runs ("" when every run tuned on the real sets): generated stand-ins have the
    paper's formats, but their lengths are the generator's, not alpaca's or C4-200M's."""
    ok = ok_runs(runs)
    if ok.empty or "data_source" not in ok:
        return ""
    # `auto` (a spec written before canonical() resolved it): the model's own, as run/llm/spec.py
    model = ok["model"] if "model" in ok else pd.Series("tiny", index=ok.index)
    auto = model.map(lambda m: "synthetic" if m == "tiny" else "real")
    source = ok["data_source"].where(ok["data_source"] != "auto", auto)
    synthetic = sorted(set(source.dropna().astype(str)) - {"real"})
    if not synthetic:
        return ""
    return (
        f"the runs tuned on data_source {', '.join(synthetic)} (generated "
        "sets in the paper's formats, whose lengths are the generator's, not the paper's "
        "data sets'); `make assets` and LLAMA3_DIR give the real ones"
    )
