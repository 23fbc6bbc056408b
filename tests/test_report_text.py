"""What the report says, read as a reviewer reads it (issue 26, item 5): the settings the runs
actually used beside the paper scale's, wording that follows what ran (no repeats wording
with one repeat), one meaning of "efficiency", the CPU caveat once, tables narrow enough for a
PDF page, the noise floor with the tally, the next scale's cost and a bounded length.

The rendered report is test_report.py's (a fake sweep of V1-V4 and V7), made once per session for
both modules (conftest's fake_report)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from analysis.claims import spec as cs
from analysis.claims import verdicts as cl
from report import build, nextgpu, settings, tables, wording
from run import store
from run.sweep import matrix as mx


@pytest.fixture(scope="module")
def built(fake_report):
    """test_report.py's fake sweep of V1-V4 and V7, and its report, with its sandbox set for this
    module's tests."""
    return fake_report


def test_the_settings_are_the_runs_own(built):
    """conftest's TINY_VISION is what the fake runs' spec.json files hold: the report says so,
    not the paper scale's 64 / 0.001 / 500 px."""
    md = built[0][".md"]
    assert "| vision: batch size per rank | 16 |" in md
    assert "| vision: learning rate (Adam) | 0.002 |" in md
    assert "| vision: image size [px] | 32; 32, 40 in V2 |" in md  # V2 varies the size
    assert "| vision: train / test images | 64 / 32 |" in md
    assert "| vision: DataLoader workers per rank | 0 |" in md
    assert "| all: repeats per cell | 1 |" in md
    # our versions beside the papers' (experiments/assumptions.yaml, paper_software)
    assert re.search(r"^\| torch \| 2\.\d+[^|]* \| 2\.2\.2 \|$", md, re.M)
    assert "| torchtune |" in md and "| CUDA |" in md and "| Python |" in md


def test_settings_group_values_and_set_the_paper_profile_beside(tmp_path):
    """Smoke-like runs (V3 at 64 px, a quarter-width model, lr 0.003) read from their folders,
    and the real matrix's paper scale for the same experiments."""
    root = tmp_path / "results"
    base = {"workload": "vision", "dataset": "digits", "scenario": "A", "train_images": 256,
            "test_images": 128, "image_size": 32, "width_mult": 1.0, "batch_size": 16,
            "lr": 0.002, "num_workers": 0, "epochs": 2, "gpus": 1}  # fmt: skip
    cells = {"V1": [base, {**base, "gpus": 2}],
             "V3": [{**base, "image_size": 64, "width_mult": 0.25, "lr": 0.003,
                     "train_images": 1280}]}  # fmt: skip
    for exp, specs in cells.items():
        names = []
        for i, spec in enumerate(specs):
            name = f"{exp.lower()}-run{i}"
            run = store.run_dir("smoke", name, root)
            run.mkdir(parents=True)
            (run / store.SPEC).write_text(json.dumps(spec))
            (run / store.SUMMARY).write_text(json.dumps(
                {"status": "ok", "device": "cpu", "launch_wall_s": 30.0,
                 "cpu_threads_per_rank": 1}))  # fmt: skip
            names.append({"run": name})
        store.sweeps_dir("smoke", root).mkdir(parents=True, exist_ok=True)
        (store.sweeps_dir("smoke", root) / f"{exp}.json").write_text(
            json.dumps({"experiment": exp, "repeats": 1, "runs": names})
        )
    ran = settings.ran(root, "smoke", ["V1", "V3"])
    got = ran["settings"]
    assert got[("vision", "learning rate (Adam)")] == "0.002; 0.003 in V3"
    assert got[("vision", "image size [px]")] == "32; 64 in V3"
    assert got[("vision", "MobileNetV2 width multiplier")] == "1; 0.25 in V3"
    assert got[("any", "ranks ('GPUs') per run")] == "1, 2; 1 in V3"
    assert ran["runs"] == 3 and ran["wall_s"] == 90.0 and ran["threads"] == [1]
    matrix = mx.load_matrix(store.REPO / "experiments" / "matrix.yaml")  # not the sandbox's
    paper = settings.planned("paper", ["V1", "V3"], matrix)
    assert paper[("vision", "batch size per rank")] == "64"
    assert paper[("vision", "train / test images")] == "60,000 / 10,000"
    assert settings.grouped({"V1": [1, 2, 3, 4]}, ["V1"]) == "1-4"


def test_no_repeats_wording_with_one_repeat(built):
    md, tex = built[0][".md"], built[0][".tex"]
    for text in (md, tex):
        assert "min-max" not in text and "in brackets" not in text
    # with repeats, the table says what its brackets are
    t = {"sources": ["paper", "me"], "ranges": {"paper": False, "ours": True}, "repeats": 3,
         "words": [], "paper_rows_left_out": 0}  # fmt: skip
    assert (
        "ours: medians of 3 repeats, min-max in brackets" in tables.intro(t, "x.csv", False)["tail"]
    )
    rows = [{"gpus": 1, "t_s": 2.0, "t_s_min": 1.5, "t_s_max": 2.5, "repeats": 3}]
    meta = {"compact": rows, "compact_columns": ["gpus", "t_s", "t_s_min", "t_s_max", "repeats"],
            "keys": ["gpus"]}  # fmt: skip
    got = tables.side_by_side([meta], ["me"])
    assert got["rows"] == [["1", "2 (1.50-2.50)"]] and got["ranges"]["ours"]


def test_efficiency_means_speed_up_per_gpu_only(built):
    """The paper's "efficiency" of Tables 2-3 is speed-up x 100: headings call it that, and
    "efficiency" is left for speed-up / GPUs (V2), or quoted as the paper's word."""
    allowed = ("efficiency (speed-up / GPUs)", "GPUs efficiency", "call 'efficiency'")
    for text in (built[0][".md"], built[0][".tex"]):
        for m in re.finditer(r"efficiency", text, re.I):
            around = text[max(0, m.start() - 30) : m.end() + 30]
            assert any(a in around for a in allowed), around
    md = built[0][".md"]
    assert "speed-up vs 1 GPU [%], paper" in md and "speed vs FP64 [%], ours" in md
    assert "speed vs unpinned [%], ours" in md


def test_the_cpu_caveat_is_said_once(built):
    md, tex = built[0][".md"], built[0][".tex"]
    assert md.count("No GPU was used") == 1 and tex.count("No GPU was used") == 1
    assert "stands in for one GPU" in md and "cpu_threads_per_rank" in md
    assert cl.NO_GPU not in md
    claim = next(c for c in cs.load() if c["id"] == "V4a")
    why = f"{cl.NO_GPU} (pin_memory only changes copies ...)"
    assert wording.short_reason(why, claim, {"gpu": cl.NO_GPU}) == "needs a GPU (pinning)"
    assert wording.short_reason("", claim, {"gpu": cl.NO_GPU}) == ""
    # notes that several sections share are said once, with the experiments they apply to
    secs = [{"notes": ["shared", "own"], "experiments": ["V1"]},
            {"notes": ["shared"], "experiments": ["V2"]}]  # fmt: skip
    assert wording.hoisted(secs) == [{"text": "shared", "experiments": ["V1", "V2"]}]
    assert secs[0]["notes"] == ["own"] and secs[1]["notes"] == []


def test_verdicts_show_the_engine_s_text_and_their_runs(built):
    md = built[0][".md"]
    assert "**holds in direction; size outside the paper's 154-168 %**" in md  # verdict_text
    assert "2 of 2 cells pass; all must" in md  # cells
    assert "Runs: [mnv2-fp32-ddp_ds-1gpu-32px-nopin-e1-n64](" in md
    link = re.search(r"\]\(([^)]*runs/mnv2-fp32-ddp_ds-1gpu-32px-nopin-e1-n64)\)", md).group(1)
    assert (built[1] / link).resolve() == store.run_dir(
        "test", "mnv2-fp32-ddp_ds-1gpu-32px-nopin-e1-n64"
    ).resolve()


def test_an_older_table_without_the_new_keys_still_renders(built, tmp_path):
    """Tables written before verdict_text, noise, cells and runs existed: the verdict is shown,
    and the CSV stays the way to the runs; a noise table adds its spread to the tally."""
    other = tmp_path / "old"
    shutil.copytree(store.scale_dir("test"), store.scale_dir("test", other))
    for path in store.tables_dir("test", other).glob("*.json"):
        meta = json.loads(path.read_text())
        for c in meta["claims"]:
            for key in ("verdict_text", "noise", "cells", "runs"):
                c.pop(key, None)
        path.write_text(json.dumps(meta))
    (store.tables_dir("test", other) / "table-noise.csv").write_text(
        "workload,gpus,quantity,median,min,max,spread_pct,runs,run\n"
        "vision,1,total_time_s,10,9.8,10.2,4.1,3,a\nllm,2,s_per_it,1,0.9,1.1,20.0,3,b\n"
    )
    written = build.render("test", [other], tmp_path / "out")
    md = next(p for p in written if p.suffix == ".md").read_text()
    assert "**holds" in md and "None" not in md and "Runs: [" not in md
    assert "vision at 1 rank(s): total time 4.10 %; llm at 2 rank(s): s/it 20 %" in md
    assert "must clear it, else it is inconclusive" in md


def test_pdf_tables_are_cut_to_fit_the_page(built):
    tex = built[0][".tex"]
    assert "\\resizebox" not in tex
    for spec in re.findall(r"\\begin\{tabular\}\{([^}]*)\}", tex):
        assert len(re.sub(r"[^lrcp]", "", spec)) <= tables.TEX_MAX_COLUMNS, spec
    # V3's table (2 keys, 4 values, paper and ours) comes in parts that repeat the keys
    cut = tables.parts(2, 4, 2)
    assert [p["values"] for p in cut] == [[0, 1, 2], [3]]
    assert cut[1]["columns"] == [0, 1, 8, 9]


def test_next_on_a_gpu_node_reads_the_plan_and_names_what_it_decides():
    text = (
        '{"scale": "quick", "runs": 148, "missing": 136, "gpu_hours": 3.1997, "wall_s": 4616.7, '
        '"wall": "1 h 17 min", "node": "4 x H100"}'
    )
    got = nextgpu.parse_plan(text)
    assert got == {"runs": "148", "gpu_hours": "3.20", "wall": "1 h 17 min", "node": "4 x H100"}
    assert nextgpu.parse_plan("error: no GPU") == {}
    claim = {"gates": ["gpu"]}
    unmeasured = {"verdict": "not measured"}
    assert nextgpu.decides(claim, unmeasured, {"gpu": "no GPU"}, {1, 2}, {1, 2, 4})
    assert not nextgpu.decides({"gates": ["multi_numa"]}, unmeasured, {"multi_numa": "1 node"},
                               {1, 2}, {1, 2, 4})  # fmt: skip
    assert nextgpu.decides({}, unmeasured, {}, {1, 2}, {1, 2, 4})  # a GPU count it adds
    assert not nextgpu.decides({}, unmeasured, None, {1, 2}, {1, 2, 4})  # not built here
    assert not nextgpu.decides(claim, {"verdict": "holds"}, {"gpu": "x"}, {1}, {1, 4})


def test_the_report_is_short(built):
    """Half the length it had before issue 26 (231 lines for this fixture): each claim is one
    item, a caveat is said once, no blank line is doubled."""
    md = built[0][".md"]
    lines = md.splitlines()
    assert len(lines) <= 160, len(lines)
    assert "\n\n\n" not in md
    claims = [ln for ln in lines if re.match(r"^- \*\*[A-Z]\d+[a-z]\*\*", ln)]
    assert all("_Criterion:_" in ln and "Verdict: **" in ln for ln in claims)
