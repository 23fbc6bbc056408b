"""V5 (C Fig.3, J Fig.3-4): profiler metrics by image size, GPU count and pin_memory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import common as c
from analysis.profiles import artifact as pa

TARGET, EXP = "fig-vision-metrics", "V5"
CONDITIONS = ["image_size", "gpus", "pin_memory"]
NCCL = ["nccl_allgather_ring_ll", "nccl_broadcast", "nccl_other"]
METRICS = ["memcpy_htod", "cudaLaunchKernel", "cudaStreamSynchronize", *NCCL]


def build_table(runs: pd.DataFrame, tidy: pd.DataFrame) -> pd.DataFrame:
    t = pa.table(runs, tidy, CONDITIONS, METRICS)  # + kernel_launch_all beside cudaLaunchKernel
    t = t.assign(k=pa.kind_order(t))
    return t.sort_values([*CONDITIONS, "k"], kind="mergesort").drop(columns="k")


def claims(t: pd.DataFrame) -> list[dict[str, str]]:
    sizes = sorted(t["image_size"].unique())
    gpus = sorted(t["gpus"].unique())
    small, large, gmin, gmax = sizes[0], sizes[-1], gpus[0], gpus[-1]
    out = []
    # V5a: launch + NCCL share larger at the small size, for every (GPUs, pin) pair.
    text = "At 100 px kernel launch and NCCL take a larger share of time (management dominates)"
    crit = (f"share of cudaLaunchKernel + NCCL kernels at {small} px > at {large} px, for every "
            "GPU count and pin_memory setting")  # fmt: skip
    if not pa.measured(t, ["cudaLaunchKernel"]):
        out.append(pa.unmeasured_claim("V5a", text, crit, ["cudaLaunchKernel", *NCCL], t))
    else:
        pairs, ev = [], []
        for g in gpus:
            for pin in (False, True):
                a = pa.summed(
                    t,
                    ["cudaLaunchKernel", *NCCL],
                    "share_pct",
                    image_size=small,
                    gpus=g,
                    pin_memory=pin,
                )
                b = pa.summed(
                    t,
                    ["cudaLaunchKernel", *NCCL],
                    "share_pct",
                    image_size=large,
                    gpus=g,
                    pin_memory=pin,
                )
                if a is not None and b is not None:
                    pairs.append(a > b)
                    ev.append(f"{g} GPU pin={pin}: {a:.1f} % vs {b:.1f} %")
        out.append(
            c.claim(
                "V5a",
                text,
                crit,
                c.judged(all(pairs) if pairs else None),
                "; ".join(ev) or "no pairs",
            )
        )
    # V5b: pin cuts HtoD everywhere and raises cudaStreamSynchronize at the large size.
    text = ("pin_memory cuts HtoD time (500 px: 85-101 s to 16 s; 100 px: 3.1-3.6 s to 0.66 s) "
            "but raises cudaStreamSynchronize (500 px: 1.3 s to 18 s)")  # fmt: skip
    crit = (f"HtoD time with pin < without, for every size and GPU count; cudaStreamSynchronize "
            f"with pin > without at {large} px")  # fmt: skip
    if not pa.measured(t, ["memcpy_htod", "cudaStreamSynchronize"]):
        out.append(
            pa.unmeasured_claim("V5b", text, crit, ["memcpy_htod", "cudaStreamSynchronize"], t)
        )
    else:
        oks, ev = [], []
        for s in sizes:
            for g in gpus:
                off = pa.value(t, "memcpy_htod", image_size=s, gpus=g, pin_memory=False)
                on = pa.value(t, "memcpy_htod", image_size=s, gpus=g, pin_memory=True)
                if off is not None and on is not None:
                    oks.append(on < off)
                    ev.append(f"HtoD {s} px {g} GPU: {off:.3g} -> {on:.3g} s")
        for g in gpus:
            off = pa.value(t, "cudaStreamSynchronize", image_size=large, gpus=g, pin_memory=False)
            on = pa.value(t, "cudaStreamSynchronize", image_size=large, gpus=g, pin_memory=True)
            if off is not None and on is not None:
                oks.append(on > off)
                ev.append(f"StreamSync {large} px {g} GPU: {off:.3g} -> {on:.3g} s")
        out.append(c.claim("V5b", text, crit, c.judged(all(oks) if oks else None), "; ".join(ev)))
    # V5c: NCCL kernel time grows with GPUs, more with pin.
    text = "NCCL kernel time grows with GPUs (7 s to 39 s), more with pin_memory (63 s)"
    crit = (f"NCCL kernel time at {large} px: {gmax} GPUs > {gmin} GPUs (no pin), and with pin > "
            f"without at {gmax} GPUs")  # fmt: skip
    if not pa.measured(t, ["nccl_allgather_ring_ll"]) and not pa.measured(t, ["nccl_other"]):
        out.append(pa.unmeasured_claim("V5c", text, crit, NCCL, t))
    else:
        lo = pa.summed(t, NCCL, image_size=large, gpus=gmin, pin_memory=False)
        hi = pa.summed(t, NCCL, image_size=large, gpus=gmax, pin_memory=False)
        hip = pa.summed(t, NCCL, image_size=large, gpus=gmax, pin_memory=True)
        ok = None if None in (lo, hi, hip) else (hi > lo and hip > hi)
        ev = f"NCCL at {large} px: {gmin} GPU {pa.fmt(lo)}, {gmax} GPU {pa.fmt(hi)}, {gmax} GPU pin {pa.fmt(hip)}"
        out.append(c.claim("V5c", text, crit, c.judged(ok), ev))
    return out


def build(profile: str) -> Path:
    runs, skipped = c.experiment_runs(EXP, profile)
    t = build_table(runs, pa.run_metrics(runs, profile))
    return c.write_artifact(
        TARGET,
        profile,
        t,
        experiments=[EXP],
        claims=claims(t),
        notes=pa.notes(t, runs),
        paper_csv="profiler_quotes.csv",
        skipped=skipped,
        figure=True,
    )


if __name__ == "__main__":
    c.main_for(build, __doc__)
