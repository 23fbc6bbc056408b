"""Beyond the paper: the profiled runs' time breakdown in V9's and L7's tables (run_breakdown)."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.artifacts import fig_api_share, fig_timeline
from analysis.profiles import breakdown as bd
from analysis.profiles import run_breakdown as rb
from run import store
from run.node import profiling


def write_breakdown(run: str, ranks: dict[int, dict[str, float] | None], blocked: float) -> None:
    """RUN/profile_breakdown.csv as collect writes it: per rank a device row per quantity (its
    share of a 10 s window; None: no device activity recorded) and the host row."""
    rows = []
    for rank, shares in ranks.items():
        rows.append((run, rank, "nsys", bd.HOST, "window", 10.0 if shares else 0.0, None))
        rows.append((run, rank, "nsys", bd.HOST, "host_blocked", 10 * blocked, blocked))
        for q, share in (shares or {}).items():
            rows.append((run, rank, "nsys", "0", q, 10 * share, share))
        if shares:
            rows.append((run, rank, "nsys", "0", "window", 10.0, 1.0))
    run_dir = store.run_dir("test", run)
    run_dir.mkdir(parents=True)
    pd.DataFrame(rows, columns=bd.COLUMNS).to_csv(
        run_dir / profiling.PROFILE_BREAKDOWN, index=False
    )


def runs(*names: str, status: str = "ok") -> pd.DataFrame:
    df = pd.DataFrame({"run": list(names), "status": status, "gpus": 2, "device": "cuda"})
    df.attrs["scale"] = "test"
    return df


def test_device_shares_are_means_over_ranks_and_a_cpu_profile_measures_nothing(sandbox):
    write_breakdown("gpu", {0: {"busy": 0.4, "comm_not_overlapped": 0.1},
                            1: {"busy": 0.6, "comm_not_overlapped": 0.3}}, blocked=0.2)  # fmt: skip
    write_breakdown("cpu", {0: None, 1: None}, blocked=0.0)
    t = rb.table(runs("gpu", "cpu", "never-profiled"), "test").set_index("run")
    assert list(t.index) == ["gpu", "cpu"]  # a run without a breakdown has no row
    assert t.loc["gpu", "busy_pct"] == pytest.approx(50.0)
    assert t.loc["gpu", "comm_not_overlapped_pct"] == pytest.approx(20.0)
    assert t.loc["gpu", "host_blocked_pct"] == pytest.approx(20.0)
    assert (t.loc["gpu", "devices"], t.loc["gpu", "window_s"]) == (2, 10.0)
    # no device rows: the GPU columns stay empty (0 would read as an idle GPU)
    assert t.loc["cpu", "devices"] == 0 and t.loc[["cpu"], "busy_pct"].isna().all()
    note = rb.note(t.reset_index(), "x")
    assert note.startswith("Beyond the paper: time breakdown of 1 profiled run(s)")
    assert "GPU busy 50.0-50.0%" in note and "host blocked in CUDA calls 20.0-20.0%" in note
    assert "not measured" in rb.note(t.loc[["cpu"]].reset_index(), "x")
    assert "no profiled run" in rb.note(rb.table(runs("never-profiled"), "test"), "x")
    assert rb.table(runs("gpu", status="failed"), "test").empty  # only finished runs count


def test_l7_and_v9_carry_the_breakdown_labelled_beyond_the_paper(sandbox):
    write_breakdown("a", {0: {"busy": 0.25}, 1: {"busy": 0.75}}, blocked=0.1)
    df = runs("a")
    side = fig_api_share.extra(df, pd.DataFrame())["breakdown"]
    assert side["busy_pct"].tolist() == [pytest.approx(50.0)]
    assert any(
        n.startswith("Beyond the paper: time breakdown of 1") for n in fig_timeline.notes(df, df)
    )
    assert fig_timeline.BREAKDOWN == "breakdown"
