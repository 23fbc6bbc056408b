"""Every figure of analysis/artifacts/ drawn from a small table of the shape its analysis writes (no
runs): it renders, and its legend is the table's: each panel draws series that LEGENDS derives
from the table alone (the column whose values the legend tells apart), every one of them drawn,
none invented, at most MAX_SERIES per panel, each in its own colour and in the same colour in
every panel; plus the faults a reviewer found in the smoke report (a clipped panel, "CUDA API
calls" over CPU ops, series that change from group to group, whiskers promised but not drawn)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.container import BarContainer

from analysis import draw as common
from analysis import driver
from analysis.artifacts import fig_api_share as a_api
from analysis.artifacts import fig_llm_api as a_llm
from analysis.artifacts import fig_llm_api_pinmem as a_pin
from analysis.artifacts import fig_loss as a_loss
from analysis.artifacts import fig_optimized as a_opt
from analysis.artifacts import fig_timeline as a_tl
from analysis.artifacts import fig_transfers as a_tr
from analysis.artifacts import fig_vision_metrics as a_vm
from analysis.artifacts import fig_vram as a_vram
from analysis.profiles.metrics import COLUMNS as TIDY_COLUMNS
from run import store

matplotlib.use("Agg")
META = {"source": "J Fig.0", "scale": "figtest", "gates": {}}
NOT_SERIES = {"ideal (= GPUs)"}  # reference marks, not data series
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def out(tmp_path, monkeypatch):
    """The figures go to the test's folder, never to report/out; each test closes its own."""
    monkeypatch.setattr(store, "REPORT_OUT_DIR", tmp_path)
    yield
    plt.close("all")


def ok(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([{"status": "ok", "run": f"r{i}", **r} for i, r in enumerate(rows)])


def panels(fig: matplotlib.figure.Figure) -> list[dict[str, str]]:
    """Per axes that draws series: label -> colour, in drawing order (bars, lines, spans)."""
    out = []
    for ax in fig.axes:
        drawn: dict[str, str] = {}
        for c in ax.containers:
            if isinstance(c, BarContainer) and c.patches and not c.get_label().startswith("_"):
                drawn[c.get_label()] = to_hex(c.patches[0].get_facecolor())
        for line in ax.get_lines():
            if not line.get_label().startswith("_"):
                drawn[line.get_label()] = to_hex(line.get_color())
        for coll in ax.collections:
            label = coll.get_label()
            if not label.startswith("_") and label not in NOT_SERIES:
                drawn[label] = to_hex(coll.get_facecolor()[0])
        drawn = {k.replace("\n", " "): v for k, v in drawn.items() if k not in NOT_SERIES}
        if drawn:
            out.append(drawn)
    return out


TOP, BACKWARD = "top CPU op: ", " (backward node, with its autograd-engine call)"
COPIES = {"memcpy_htod": "HtoD", "memcpy_dtod": "DtoD", "memcpy_dtoh": "DtoH"}


def legend_of(rows: pd.DataFrame, col: str, name) -> set[str]:
    """The legend labels of the values of `col` among `rows` (`name`: a dict, None: not drawn)."""
    named = (name.get(v) if isinstance(name, dict) else name(v) for v in rows[col].dropna())
    return {x for x in named if x is not None}


def finished(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"]


def measured(df: pd.DataFrame) -> pd.DataFrame:
    return finished(df)[finished(df)["measured"].astype(str) == "True"]


def profile_legend(df: pd.DataFrame) -> set[str]:
    """A profile figure's series: the paper's metrics where a GPU profile measured them (their
    labels); else the CPU stand-ins and the top CPU ops that every run has, each named by its
    whole name (the engine's call of a backward node as the node, the node itself not again)."""
    rows = measured(df)
    paper = rows[rows["kind"].isin(["paper metric", "extra metric"])]
    if (paper["kind"] == "paper metric").any():
        return set(paper["label"])
    cpu = rows[rows["kind"] == "cpu op"]
    top = cpu["label"].str.startswith(TOP)
    every = cpu[top].groupby("metric")["run"].nunique() == cpu["run"].nunique()
    ops = {m.removeprefix("cpu:") for m in every[every].index}
    wrapper = "autograd::engine::evaluate_function: "
    nodes = {op.removeprefix(wrapper) for op in ops if op.startswith(wrapper)}
    tops = {TOP + op.removeprefix(wrapper) + (BACKWARD if op.startswith(wrapper) else "")
            for op in ops if op not in nodes}  # fmt: skip
    return set(cpu.loc[~top, "label"]) | tops


# Per figure, from the table alone: the labels of the series its legend tells apart (a GPU count,
# a strategy, a method...). The figure draws each of them and nothing else, but for MARKS.
LEGENDS = {
    "fig-strategies": lambda d: legend_of(finished(d), "strategy",
                                          {"ddp": "DDP", "ddp_rr": "DDP-RR", "ddp_ds": "DDP-DS"}),
    "fig-imagesize": lambda d: legend_of(finished(d), "gpus", common.gpus_label),
    "fig-datasets": lambda d: legend_of(finished(d), "gpus", common.gpus_label),
    "fig-loss": lambda d: legend_of(finished(d), "precision", str.upper),  # (x pin on/off)
    "fig-loaders": lambda d: legend_of(finished(d), "loader_label", str),
    "fig-nhwc": lambda d: legend_of(finished(d), "setup", str),
    "fig-numa": lambda d: legend_of(finished(d), "binding", str),
    # the LLM matrices: a cell that did not finish is an "n/a" in its place, its series kept
    "fig-templates": lambda d: legend_of(d, "method_label", str),
    "fig-template-scaling": lambda d: legend_of(d, "method_label", str),
    "fig-vram": lambda d: legend_of(d, "gpus", common.gpus_label),
    "fig-optimized": lambda d: legend_of(d, "gpus", common.gpus_label),
    "fig-transfers": lambda d: (legend_of(measured(d), "metric", COPIES)
                                or legend_of(measured(d), "metric",
                                             {"cpu:aten::copy_": "aten::copy_ (host copies)"})),
    "fig-timeline": lambda d: {"training step", "evaluation step", "pause (above threshold)"},
    **{t: profile_legend for t in ("fig-api-share", "fig-llm-api", "fig-llm-api-pinmem",
                                   "fig-vision-metrics")},
}  # fmt: skip
# drawn series that are no value of the table: the run every strategy shares on one GPU, the two
# sides of a profile diff
MARKS = {"fig-strategies": {"one run for all (1 rank: same work)"},
         "fig-optimized": {"faithful profile", "optimised profile"}}  # fmt: skip


def named(label: str, legend: set[str]) -> str | None:
    """The legend value a drawn label names: itself, or the one it begins with ("FP16 pin=on")."""
    hits = [v for v in legend if label == v or label.startswith(v + " ")]
    return hits[0] if len(hits) == 1 else None


def render(target: str, df: pd.DataFrame, tmp_path: Path, meta: dict = META):
    """Draw and save one figure; check the PNG, its series against the table and the colours.
    Returns (the labels drawn, in order; label -> colour per panel; the figure's texts; figure)."""
    fig = driver.load(target).figure(df, meta)
    drawn = panels(fig)
    texts = [t.get_text() for t in fig.texts] + [fig._suptitle.get_text()]
    texts += [ax.get_title() for ax in fig.axes] + [ax.get_ylabel() for ax in fig.axes]
    # a small PNG: what is tested is that it renders, not how it looks (common.save: below)
    png = tmp_path / f"{target}.png"
    fig.savefig(png, dpi=40)
    assert png.stat().st_size > 2_000
    assert drawn, f"{target}: no series drawn"
    labels = list(dict.fromkeys(label for p in drawn for label in p))
    assert target in LEGENDS, f"{target}: name in LEGENDS the table column its legend tells apart"
    legend, marks = LEGENDS[target](df), MARKS.get(target, set())
    data = [x for x in labels if x not in marks]
    assert all(named(x, legend) for x in data), (target, "invented", data, legend)
    assert {named(x, legend) for x in data} == legend, (target, "not drawn", data, legend)
    colour: dict[str, str] = {}
    for p in drawn:
        assert len(p) <= common.MAX_SERIES
        assert len(set(p.values())) == len(p), f"{target}: two series share a colour"
        for label, c in p.items():
            assert colour.setdefault(label, c) == c, f"{target}: {label} changes colour"
    return labels, drawn, " | ".join(texts), fig


def test_every_figure_of_the_matrix_has_its_legend_named():
    figures = [t for t in driver.targets() if t.startswith("fig-") and driver.load(t)]
    assert figures and sorted(figures) == sorted(LEGENDS)


# ---------------------------------------------------------------- the vision figures
def test_strategies_are_grouped_bars_with_the_ideal(tmp_path):
    df = ok([{"strategy": s, "gpus": g, "total_time_s": 10 / g ** (s != "ddp"),
              "speedup_vs_1gpu": g ** (s != "ddp") * 1.0, "efficiency_pct": 90.0}
             for s in ("ddp", "ddp_rr", "ddp_ds") for g in (1, 2)])  # fmt: skip
    labels, drawn, text, fig = render("fig-strategies", df, tmp_path)
    assert labels == ["DDP", "DDP-RR", "DDP-DS"] and len(drawn) == 2
    assert "one run each" in text
    png = common.save(fig, "fig-strategies", "figtest")  # the report's PNG and PDF
    assert png.is_relative_to(tmp_path) and png.stat().st_size > 10_000
    assert png.with_suffix(".pdf").stat().st_size > 1_000


def test_strategies_draw_the_shared_one_gpu_run_once(tmp_path):
    """On 1 GPU every strategy is the same run: one bar, not three identical ones, and no
    speed-up group whose x1.0 is its definition."""
    df = pd.DataFrame([{"strategy": s, "gpus": g, "total_time_s": 10.0 if g == 1 else 5.0 + i,
                        "speedup_vs_1gpu": g * 0.8, "efficiency_pct": 80.0, "status": "ok",
                        "run": "one" if g == 1 else f"{s}-{g}"}
                       for i, s in enumerate(("ddp", "ddp_rr", "ddp_ds")) for g in (1, 2)])  # fmt: skip
    labels, drawn, _, fig = render("fig-strategies", df, tmp_path)
    assert labels[-1].startswith("one run for all")
    time_ax, speed_ax = fig.axes[:2]
    assert len([p for p in time_ax.patches if p.get_height() == 10.0]) == 1  # the 1-GPU run
    assert [t.get_text() for t in speed_ax.get_xticklabels()] == ["2"]


def test_imagesize_keeps_a_gpu_count_s_colour_in_both_panels(tmp_path):
    df = ok([{"image_size": s, "gpus": g, "total_time_s": 10 + s / g, "speedup_vs_1gpu": 1.8,
              "efficiency_pct": 90.0 - s / 10} for s in (32, 48, 64) for g in (1, 2)])  # fmt: skip
    labels, drawn, _, fig = render("fig-imagesize", df, tmp_path)
    assert labels == ["1 GPU", "2 GPUs"] and drawn[1]["2 GPUs"] == drawn[0]["2 GPUs"]
    # both axes from zero: a range cut to the data turned 10 points into a cliff
    assert [ax.get_ylim()[0] for ax in fig.axes[:2]] == [0, 0]
    assert fig.axes[1].get_ylim()[1] >= 100  # the ideal line is in view


def loss_table(differ: set[str]) -> pd.DataFrame:
    """V7's table: pin_memory off and on alike, but for the precisions in `differ`."""
    return ok([{"precision": p, "pin_memory": pin, "gpus": 2, "epoch": e,
                "train_loss": 1 / e + (0.1 * pin if p in differ else 0),
                "test_accuracy_pct": 50.0 * e} for p in ("fp16", "fp32", "fp64")
               for pin in (False, True) for e in (1, 2)])  # fmt: skip


def test_loss_pairs_pin_off_and_on_where_they_differ(tmp_path):
    labels, drawn, text, _ = render("fig-loss", loss_table({"fp16", "fp32", "fp64"}), tmp_path)
    assert labels[:2] == ["FP64 pin=off", "FP64 pin=on"] and len(labels) == 6
    assert "identical" not in text


def test_loss_draws_an_identical_pair_once_and_says_why(tmp_path):
    """pin_memory is a no-op on a CPU: two identical bars are no comparison. Each identical pair
    is one series, named so; a pair that differs keeps both."""
    meta = {**META, "gates": {"gpu": "no GPU"}}
    labels, drawn, text, _ = render("fig-loss", loss_table({"fp16"}), tmp_path, meta)
    assert labels == ["FP64 (pin off = on)", "FP32 (pin off = on)", "FP16 pin=off",
                        "FP16 pin=on"]  # fmt: skip
    assert "no-op without a GPU" in text and "FP64, FP32" in text
    _, _, text, _ = render("fig-loss", loss_table(set()), tmp_path)  # a GPU run: no "no-op"
    assert "identical" in text and "no-op" not in text


@pytest.mark.parametrize("target,by,values", [
    ("fig-loaders", "loader_label", ["DataLoader", "DALI"]),
    ("fig-nhwc", "setup", ["DataLoader NCHW", "DataLoader NHWC", "DALI NCHW", "DALI NHWC"]),
    ("fig-numa", "binding", ["unbound", "bound (numactl)"]),
])  # fmt: skip
def test_scenario_b_bars_keep_the_table_order(tmp_path, target, by, values):
    df = ok([{by: v, "gpus": g, "total_time_s": 10.0 / g + i} for i, v in enumerate(values)
             for g in (1, 2)])  # fmt: skip
    labels, _, _, _ = render(target, df, tmp_path)
    assert labels == values


def test_a_value_whose_runs_all_failed_is_drawn_as_its_figure_promises(tmp_path):
    """A loader none of whose runs finished is no bar (LEGENDS: finished runs); a GPU count of
    the LLM matrix whose runs all failed keeps its bars, "n/a" in their place (LEGENDS: all)."""
    df = ok([{"loader_label": v, "gpus": 1, "total_time_s": 5.0} for v in ("DataLoader", "DALI")])
    labels, _, _, _ = render("fig-loaders", df.assign(status=["ok", "failed"]), tmp_path)
    assert labels == ["DataLoader"]
    df = llm_cells(["LoRA", "QLoRA", "DPO", "QAT"], "peak_memory_gib")
    labels, _, _, _ = render("fig-vram", df.assign(status=df["status"].where(df["gpus"] == 1,
                                                                           "failed")), tmp_path)  # fmt: skip
    assert labels == ["1 GPU", "2 GPUs"]


@pytest.mark.parametrize("target", ["fig-loaders", "fig-nhwc"])
def test_dali_on_cpu_ranks_is_said_to_decode_on_the_cpu(tmp_path, target):
    df = ok([{"loader_label": v, "setup": v, "gpus": 1, "total_time_s": 5.0}
             for v in ("DataLoader", "DALI")])  # fmt: skip
    cpu = {**META, "gates": {"gpu": "no GPU"}}
    assert "DALI decodes on the CPU" in render(target, df, tmp_path, cpu)[2]
    assert "decodes on the CPU" not in render(target, df, tmp_path)[2]


def test_numa_says_why_binding_is_not_compared(tmp_path):
    df = ok([{"binding": "unbound", "gpus": g, "total_time_s": 5.0} for g in (1, 2)])
    meta = {**META, "gates": {"multi_numa": "1 NUMA node on this machine"}}
    assert "1 NUMA node" in render("fig-numa", df, tmp_path, meta)[2]


def test_timeline_draws_steps_pauses_and_where_epochs_and_evaluations_began(tmp_path, monkeypatch):
    """V9a is about pauses before each epoch and evaluation: the figure marks where each began
    on each rank (the -phases table), and draws evaluation steps apart from training steps."""
    df = ok([{"loader": "torch", "gpus": 2, "pauses": 1, "threshold_s": 0.5}])
    busy = pd.DataFrame({"run": "r0", "rank": [0, 1, 0, 1], "phase": ["train_step"] * 2
                         + ["eval_step"] * 2, "t0": [0.1, 0.1, 2.0, 2.1],
                         "t1": [1.0, 1.2, 2.5, 2.6]})  # fmt: skip
    gaps = pd.DataFrame({"run": ["r0"], "rank": [1], "start_s": [1.2], "length_s": [0.9]})
    phases = pd.DataFrame({"run": "r0", "rank": [0, 1, 0, 1], "phase": ["epoch"] * 2
                           + ["eval"] * 2, "epoch": 1, "t0": [0.0, 0.0, 1.9, 2.1],
                           "t1": [1.0, 1.2, 2.5, 2.6]})  # fmt: skip
    tables = {"busy": busy, "gaps": gaps, "phases": phases}
    monkeypatch.setattr(common, "extra_table", lambda t, p, name: tables[name])
    labels, drawn, _, fig = render("fig-timeline", df, tmp_path)
    assert list(drawn[0]) == labels == ["training step", "evaluation step",
                                          "pause (above threshold)"]  # fmt: skip
    marks = [c for c in fig.axes[0].collections if c.get_label() in ("_epoch", "_eval")]
    assert sorted(c.get_label() for c in marks) == ["_epoch"] * 2 + ["_eval"] * 2
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "epoch start" in legend and "evaluation start" in legend


def test_timeline_table_keeps_where_each_epoch_and_evaluation_began(monkeypatch):
    """The -phases table (the figure's marks) holds the timelines' epoch and eval spans; the
    -busy table keeps the steps only."""
    tl = pd.DataFrame([("epoch", 1, None, 0.0, 1.0), ("train_step", 1, 0, 0.1, 1.0),
                       ("eval", 1, None, 1.0, 1.5), ("eval_step", 1, 0, 1.1, 1.5)],
                      columns=["phase", "epoch", "step", "t0", "t1"]).assign(rank=0)  # fmt: skip
    monkeypatch.setattr(a_tl, "read", lambda run, scale, ranks: tl)
    monkeypatch.setattr(a_tl.run_breakdown, "table", lambda runs, scale: pd.DataFrame())
    runs = pd.DataFrame([{"run": "r0", "status": "ok", "gpus": 1, "loader": "torch"}])
    runs.attrs["scale"] = "figtest"
    out = a_tl.extra(runs, pd.DataFrame())
    assert list(out["phases"]["phase"]) == ["epoch", "eval"]
    assert list(out["phases"]["t0"]) == [0.0, 1.0]
    assert list(out["busy"]["phase"]) == ["train_step", "eval_step"]


# ---------------------------------------------------------------- the LLM time figures
def test_datasets(tmp_path):
    df = ok([{"dataset": d, "gpus": g, "s_per_it": 0.1 * g, "epoch_time_s": 30.0 * g,
              "epoch_time_projected": True} for d in ("alpaca", "grammar", "samsum", "slimorca")
             for g in (1, 2)])  # fmt: skip
    assert render("fig-datasets", df, tmp_path)[0] == ["1 GPU", "2 GPUs"]


def llm_cells(methods: list[str], value: str, dpo: float = 4.0) -> pd.DataFrame:
    rows = []
    for t in ("Instruct", "Summary", "Error Correction"):
        for m in methods:
            for g in (1, 2):
                status = "unsupported" if (m, g) == ("QLoRA", 2) else "ok"
                rows.append({"template": t, "method_label": m, "gpus": g, "status": status,
                             value: (dpo if m == "DPO" else 1.0) * (0.1 if t == "Summary" else 1),
                             "epoch_time_projected": False, "memory_kind": "host_rss"})  # fmt: skip
    return pd.DataFrame(rows).assign(run=lambda d: [f"r{i}" for i in range(len(d))])


def test_template_scaling_gives_each_panel_its_own_range(tmp_path):
    df = llm_cells(["LoRA", "DPO"], "tuning_time_s", dpo=40.0)
    labels, _, text, fig = render("fig-template-scaling", df, tmp_path)
    assert labels == ["LoRA", "DPO"]
    for ax, top in zip(fig.axes[:3], (40.0, 4.0, 40.0), strict=True):
        assert ax.get_ylim()[1] >= top  # the DPO bar is never clipped
        assert ax.get_ylabel().startswith("tuning time")  # its own scale, its own label
    assert fig.axes[1].get_ylim()[1] < 10  # and Summary is not flattened by the others
    assert "own y scale" in text


def test_templates_and_vram_name_a_missing_cell(tmp_path):
    df = llm_cells(["LoRA", "QLoRA", "DPO", "QAT"], "s_per_it")
    _, drawn, _, _ = render("fig-templates", df, tmp_path)
    assert all(list(p) == ["LoRA", "QLoRA", "DPO", "QAT"] for p in drawn)
    df = llm_cells(["LoRA", "QLoRA", "DPO", "QAT"], "peak_memory_gib")
    labels, _, text, fig = render("fig-vram", df, tmp_path)
    assert labels == ["1 GPU", "2 GPUs"]
    assert any(t.get_text() == "n/a" for ax in fig.axes for t in ax.texts)
    assert "host RSS" in text and "Peak VRAM" not in text and "VRAM per GPU" not in text


@pytest.mark.parametrize("kind", sorted(store.GPU_MEMORY))
def test_vram_on_a_gpu_says_vram(tmp_path, kind):
    """Either GPU reading (torchtune's active peak, or torch's max allocated) is VRAM."""
    df = llm_cells(["LoRA", "QLoRA", "DPO", "QAT"], "peak_memory_gib").assign(memory_kind=kind)
    _, _, text, _ = render("fig-vram", df, tmp_path)
    assert "Peak VRAM per GPU" in text and "host" not in text


# ---------------------------------------------------------------- the profiler figures
def tidy(rows: list[tuple], source: str) -> pd.DataFrame:
    """(run, rank, metric, total_s, share, bytes) -> the readers' tidy metrics table."""
    recs = [{"run": r, "rank": k, "source": source, "metric": m, "raw_name": m, "calls": 3,
             "total_s": s, "bytes": b, "share": sh} for r, k, m, s, sh, b in rows]  # fmt: skip
    return pd.DataFrame(recs, columns=TIDY_COLUMNS).astype({"bytes": "Int64"})


GPU_METRICS = ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaEventSynchronize",
               "memcpy_htod", "memcpy_dtod", "nccl_allgather_ring_ll", "nccl_broadcast"]  # fmt: skip
CPU_OPS = ["aten::copy_", "aten::to", "gloo:all_reduce", "Optimizer.step#AdamW.step",
           "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]  # fmt: skip


def profile_case(cells: list[dict], device: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """GPU runs with the paper's metrics (nsys), or CPU runs with CPU ops whose top ops differ
    from run to run (torch), as the two kinds of profile the smoke and a GPU run leave."""
    runs = pd.DataFrame([{"status": "ok", "device": device, "run": f"r{i}", **c}
                         for i, c in enumerate(cells)])  # fmt: skip
    rows = []
    for i, run in enumerate(runs["run"]):
        if device != "cpu":
            rows += [(run, 0, m, 0.1 * (j + 1), 0.01 * (j + 1), 10**6 * (j + 1))
                     for j, m in enumerate(GPU_METRICS)]  # fmt: skip
            continue
        ops = [*CPU_OPS, "aten::mm", f"aten::only_in_run_{i}", "autograd::engine::"
               "evaluate_function: ConvolutionBackward0 and a long name"]  # fmt: skip
        rows += [(run, 0, "cpu:" + op, 0.5 / (j + 1), 0.2 / (j + 1), None)
                 for j, op in enumerate(ops)]  # fmt: skip
    return runs, tidy(rows, "torch" if device == "cpu" else "nsys")


LLM_CELLS = [{"dataset": d, "method": m, "gpus": 2, "s_per_it": 0.5}
             for m in ("lora", "dpo") for d in ("instruct", "summary")]  # fmt: skip
PROFILE_FIGURES = [
    ("fig-api-share", a_api, LLM_CELLS),
    ("fig-llm-api", a_llm, [{"dataset": d, "s_per_it": 0.5} for d in ("alpaca", "samsum")]),
    (
        "fig-llm-api-pinmem",
        a_pin,
        [{"gpus": g, "pin_memory": p, "s_per_it": 0.5} for g in (1, 2) for p in (False, True)],
    ),  # fmt: skip
    (
        "fig-vision-metrics",
        a_vm,
        [{"image_size": s, "gpus": 2, "pin_memory": False} for s in (32, 48)],
    ),  # fmt: skip
]


@pytest.mark.parametrize("target,art,cells", PROFILE_FIGURES)
def test_profile_figure_on_a_gpu_says_what_it_recorded(tmp_path, target, art, cells):
    runs, td = profile_case(cells, "H100")
    labels, drawn, text, _ = render(target, art.build_table(runs, td), tmp_path)
    launch = labels.index("cudaLaunchKernel")
    assert labels[launch + 1].startswith("kernel launches, all APIs") and "CUDA API calls" in text
    assert "Nsight Systems" in text and "CPU ops" not in text
    assert all(list(p) == labels for p in drawn)


@pytest.mark.parametrize("target,art,cells", PROFILE_FIGURES)
def test_profile_figure_on_a_cpu_keeps_its_series_in_every_group(tmp_path, target, art, cells):
    runs, td = profile_case(cells, "cpu")
    labels, drawn, text, _ = render(target, art.build_table(runs, td), tmp_path)
    assert "CUDA API calls" not in text and "CPU ops (torch.profiler" in text
    assert "inclusive" in text  # nested op times: said so, never stacked
    # a top op that only one run has is no series (its absence elsewhere says nothing)
    assert not any("only_in_run" in s for s in labels) and "only_in_run_0" in text
    assert all(list(p) == labels for p in drawn)
    whole = [s for s in labels if s.startswith("top CPU op:") and "ConvolutionBackward0" in s]
    # the whole name, not a 40-character cut, named as the node its engine call runs
    assert not whole or whole[0].endswith(
        "a long name (backward node, with its autograd-engine call)"
    )


@pytest.mark.parametrize("target,art,cells", PROFILE_FIGURES)
def test_pin_memory_groups_on_a_cpu_are_said_to_be_the_same_work(tmp_path, target, art, cells):
    runs, td = profile_case(cells, "cpu")
    meta = {**META, "gates": {"gpu": "no GPU"}}
    text = render(target, art.build_table(runs, td), tmp_path, meta)[2]
    said = "pin_memory is a no-op without a GPU" in text
    assert said == any("pin_memory" in c for c in cells)
    runs, td = profile_case(cells, "H100")
    assert "no-op" not in render(target, art.build_table(runs, td), tmp_path)[2]


def test_a_backward_node_and_its_engine_call_are_one_series(tmp_path):
    """MmBackward0 and autograd::engine::evaluate_function: MmBackward0 are nearly the same time
    (the call holds the node): one series, the inclusive call named as the node, the other said
    to be inside it."""
    runs = pd.DataFrame([{"status": "ok", "device": "cpu", "run": f"r{i}", "dataset": d,
                          "s_per_it": 0.5} for i, d in enumerate(("alpaca", "samsum"))])  # fmt: skip
    ops = [("autograd::engine::evaluate_function: MmBackward0", 0.9), ("MmBackward0", 0.88),
           ("aten::mm", 0.5), ("aten::copy_", 0.1)]  # fmt: skip
    td = tidy([(r, 0, "cpu:" + op, s, s / 3, None) for r in runs["run"] for op, s in ops], "torch")
    labels, drawn, text, _ = render("fig-llm-api", a_llm.build_table(runs, td), tmp_path)
    mm = [s for s in labels if "MmBackward0" in s]
    assert mm == ["top CPU op: MmBackward0 (backward node, with its autograd-engine call)"], labels
    assert "inside the autograd-engine call drawn for it" in text


def test_transfers_bytes_on_a_gpu_and_host_copy_time_on_a_cpu(tmp_path):
    runs, td = profile_case(LLM_CELLS, "H100")
    labels, _, text, _ = render("fig-transfers", a_tr.build_table(runs, td), tmp_path)
    assert labels == ["HtoD", "DtoD", "DtoH"] and "[MB]" in text and "bytes moved" in text
    runs, td = profile_case(LLM_CELLS, "cpu")
    labels, _, text, _ = render("fig-transfers", a_tr.build_table(runs, td), tmp_path)
    assert labels == ["aten::copy_ (host copies)"] and "time, not bytes" in text
    assert "[s]" in text and "bytes moved" not in text


@pytest.mark.parametrize("device", ["H100", "cpu"])
def test_section_titles_name_what_the_runs_measured(device):
    """The report's headings (the artifacts' title()) follow the data, not the matrix's words:
    VRAM, CUDA API calls and bytes per direction only where a GPU profile measured them."""
    gpu = device != "cpu"
    runs, td = profile_case(LLM_CELLS, device)
    api, copies = a_api.title(runs, a_api.build_table(runs, td)), a_tr.title(
        runs, a_tr.build_table(runs, td))  # fmt: skip
    assert ("CUDA API calls" in api) == gpu and ("CPU ops" in api) != gpu
    assert ("Bytes moved per direction" in copies) == gpu and ("aten::copy_" in copies) != gpu
    kind = "gpu_active" if gpu else "host_peak_rss"
    vram = a_vram.title(runs, pd.DataFrame({"memory_kind": [kind, None]}))
    assert vram.startswith("Peak VRAM") == gpu and ("host" in vram) != gpu
    timeline = a_tl.title(runs, pd.DataFrame())
    assert "GPU activity" not in timeline and ("CPU ranks" in timeline) != gpu


def test_loss_title_says_when_pin_memory_changed_nothing():
    cpu = pd.DataFrame({"device": ["cpu"]})
    assert "identical, a no-op without a GPU" in a_loss.title(cpu, loss_table(set()))
    assert a_loss.title(cpu, loss_table({"fp16"})) == "Training loss by precision and pin_memory"
    gpu = pd.DataFrame({"device": ["H100"]})
    assert a_loss.title(gpu, loss_table(set())).endswith("(pin_memory off and on identical)")


def test_titles_break_between_phrases_only():
    title = "Time in CPU ops (torch.profiler; no CUDA on this machine), by dataset (LoRA, 1 GPU)"
    for width in (10, 30, 45, 60, 200):
        lines = common.wrap_phrases(title, width).split("\n")
        assert " ".join(lines) == title
        assert all(line.count("(") == line.count(")") for line in lines), lines
    assert common.wrap_phrases(title, 60).split("\n") == [
        "Time in CPU ops (torch.profiler; no CUDA on this machine),",
        "by dataset (LoRA, 1 GPU)",
    ]


def test_metrics_past_the_limit_fold_into_other(tmp_path):
    keep, rest = common.fold([f"m{i}" for i in range(10)])
    assert len(keep) == common.MAX_SERIES and keep[-1] == common.OTHER and len(rest) == 3
    assert len(set(common.colours(keep).values())) == len(keep)
    with pytest.raises(ValueError):
        common.colours([f"m{i}" for i in range(len(common.PALETTE) + 1)])


# ---------------------------------------------------------------- beyond the paper
def ladder_table(repeats: bool) -> pd.DataFrame:
    rows = []
    for exp, workload in (("O1", "vision"), ("O3", "llm")):
        for step, label in enumerate(("faithful", "pinned", "compiled")):
            for g in (1, 2):
                for seed in (0, 1) if repeats else (0,):
                    rows.append({"experiment": exp, "workload": workload, "step": step,
                                 "step_label": label, "gpus": g, "seed": seed,
                                 "throughput": 100.0 * (step + 1) * g + 5 * seed,
                                 "unit": a_opt.UNITS[workload], "accuracy_pct": 90.0,
                                 "loss": 1.0, "optimizer_state_mib": 5.0,
                                 "status": "ok" if step < 2 or g < 2 else "unsupported"})  # fmt: skip
    return ok(rows)


@pytest.mark.parametrize("repeats", [False, True])
def test_optimized_promises_whiskers_only_with_repeats(tmp_path, repeats):
    labels, drawn, text, fig = render("fig-optimized", ladder_table(repeats), tmp_path)
    assert labels == ["1 GPU", "2 GPUs"]  # no profiled pair: no diff panel, no sides
    assert ("whiskers" in text) == repeats
    caps = [c for ax in fig.axes for c in ax.containers if getattr(c, "errorbar", None)]
    assert bool(caps) == repeats


def test_optimized_draws_the_second_measure_from_zero_in_its_own_strip(tmp_path):
    """Accuracy or loss on a twin axis cut to its range made one test image a trend and ran its
    line over the speed-ups: it has its own strip under the bars, from zero, named on its axis."""
    _, _, _, fig = render("fig-optimized", ladder_table(False), tmp_path)
    strips = [ax for ax in fig.axes if ax.get_lines()]
    assert [ax.get_ylabel() for ax in strips] == ["test accuracy [%]", "loss after N steps"]
    assert all(ax.get_ylim()[0] == 0 for ax in strips) and strips[0].get_ylim()[1] >= 100
    with_speedups = [ax for ax in fig.axes if any(t.get_text().startswith("x") for t in ax.texts)]
    assert len(with_speedups) == 2 and not any(ax.get_lines() for ax in with_speedups)
    assert [ax.get_ylabel() for ax in with_speedups] == ["images/s", "tokens/s"]


def test_optimized_draws_the_profile_diff_of_a_profiled_pair(tmp_path, monkeypatch):
    """One more panel per profiled (ladder, GPUs) pair: each kept metric's seconds before and
    after, the change at the end; no pair, no panel."""

    diff = pd.DataFrame(
        [("O1", 1, "compile", m, "total_s", a, b, (b - a) / a * 100 if a else None, p)
         for m, a, b, p in (("paper_total", 6.0, 2.5, "both"), ("breakdown:busy", 6.0, 4.0, "both"),
                            ("cudaMalloc", 0.0, 1.0, "b only"))]
        + [("O1", 1, "compile", "paper_total", "calls", 10, 8, -20.0, "both")],
        columns=["experiment", "gpus", "optimised_step", "metric", "field", "a", "b",
                 "change_pct", "present"],
    )  # fmt: skip
    tables = {"profile-diff": diff}
    monkeypatch.setattr(common, "extra_table", lambda t, p, name: tables[name])
    labels, _, text, fig = render("fig-optimized", ladder_table(False), tmp_path)
    assert labels == ["1 GPU", "2 GPUs", "faithful profile", "optimised profile"]
    diff_axes = [
        ax for ax in fig.axes if "profile, faithful -> compile" in ax.get_title(loc="left")
    ]
    assert len(diff_axes) == 1
    ax = diff_axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cudaMalloc", "breakdown:busy",
                                                           "paper_total"]  # fmt: skip
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert widths == [0.0, 1.0, 2.5, 4.0, 6.0, 6.0]  # seconds only: the calls row is not drawn
    labels = sorted(t.get_text().strip() for t in ax.texts)
    assert labels == ["-33%", "-58%", "b only"]
    tables["profile-diff"] = diff.iloc[:0]
    plt.close("all")
    _, _, _, fig = render("fig-optimized", ladder_table(False), tmp_path)
    assert not [ax for ax in fig.axes if "profile," in ax.get_title(loc="left")]
