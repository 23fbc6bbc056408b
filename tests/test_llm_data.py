"""LLM data sets read streaming: a template subset of a large parent (JSON Lines file or Hugging
Face dataset) never holds the parent in memory, whole-set DPO pairs stream, pre-run checks read
only the first rows, and a bad row that is used is reported as one line naming file and line.
And the template subsets' token counts set against the paper's (L5's token table and notes)."""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from analysis import common as c
from analysis import driver
from analysis.artifacts import fig_templates
from run import store
from run.llm import catalog
from run.llm import spec as llm_spec
from run.llm.assets import AssetError
from run.llm.data import readers
from run.llm.data import subsets as llm_subsets
from run.sweep import matrix as mx

PARENT_ROWS = 300_000
SUBSET = 500
GRAMMAR_COLUMNS = catalog.DATASETS["grammar"].columns


def grammar_row(i: int) -> dict[str, str]:
    # about 170 bytes a row: 300k rows make a parent of ~50 MB
    return {
        "input": f"row {i} the quick brown fox jump over a lazy dog near river bank",
        "output": f"Row {i}: the quick brown fox jumps over the lazy dog by the river bank.",
    }


@pytest.fixture(scope="module")
def big_parent(tmp_path_factory) -> Path:
    """LLM_DATASETS_DIR/grammar.jsonl with PARENT_ROWS rows, written once for the module."""
    folder = tmp_path_factory.mktemp("datasets")
    path = folder / "grammar.jsonl"
    with open(path, "w") as fh:
        for i in range(PARENT_ROWS):
            fh.write(json.dumps(grammar_row(i)) + "\n")
    return path


@pytest.fixture
def real_env(tmp_path, monkeypatch, big_parent) -> Path:
    """The hf source (the model llama3_8b) reading its parents from the big file's folder."""
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llmdata"))
    monkeypatch.setenv("LLM_DATASETS_DIR", str(big_parent.parent))
    return big_parent


def peak_bytes(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- JSON Lines parent
def test_subset_of_a_large_jsonl_parent_streams(real_env):
    size = real_env.stat().st_size
    assert size > 20 * 1024 * 1024
    path, peak = peak_bytes(lambda: llm_subsets.template_subset("error-correction", SUBSET, "hf"))
    assert peak < 0.1 * size, f"peak {peak} bytes for a {size}-byte parent"
    expected = [grammar_row(i) for i in llm_subsets.subset_indices(PARENT_ROWS, SUBSET)]
    assert lines_of(path) == expected
    assert path == llm_subsets.template_subset("error-correction", SUBSET, "hf")  # made once


def test_pre_run_check_of_a_real_parent_reads_its_head_only(real_env, tmp_path, monkeypatch):
    cfg, peak = peak_bytes(
        lambda: llm_subsets.dataset_config("grammar", "lora", "llama3_8b", SUBSET)
    )
    assert cfg["data_files"] == str(real_env) and cfg["source"] == "json"
    assert peak < 0.01 * real_env.stat().st_size
    # a bad row past the first HEAD_ROWS is not looked at before the run
    folder = tmp_path / "other"
    folder.mkdir()
    rows = [json.dumps(grammar_row(i)) for i in range(readers.HEAD_ROWS + 50)]
    (folder / "grammar.jsonl").write_text("\n".join([*rows, '{"input": ']) + "\n")
    monkeypatch.setenv("LLM_DATASETS_DIR", str(folder))
    llm_subsets.dataset_config("grammar", "lora", "llama3_8b", SUBSET)
    (folder / "grammar.jsonl").write_text('{"input": "a"}\n' + "\n".join(rows) + "\n")
    with pytest.raises(AssetError, match="line 1: missing column.*output"):
        llm_subsets.dataset_config("grammar", "lora", "llama3_8b", SUBSET)


def test_a_bad_row_that_is_used_names_file_and_line(tmp_path, monkeypatch):
    n = 2000
    chosen = llm_subsets.subset_indices(n, 40)
    bad_row, unused = chosen[3], next(i for i in range(n) if i not in chosen)
    lines = [json.dumps(grammar_row(i)) for i in range(n)]
    lines[unused] = "not json at all"  # never parsed: it is not in the subset
    lines[bad_row] = '{"input": "x", "output": '
    folder = tmp_path / "datasets"
    folder.mkdir()
    parent = folder / "grammar.jsonl"
    parent.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llmdata"))
    monkeypatch.setenv("LLM_DATASETS_DIR", str(folder))
    with pytest.raises(AssetError) as err:
        llm_subsets.template_subset("error-correction", 40, "hf")
    msg = str(err.value)
    assert len(msg.splitlines()) == 1
    assert msg.startswith(f"malformed data file {parent} line {bad_row + 1}: ")
    lines[bad_row] = json.dumps({"input": "x"})
    parent.write_text("\n".join(lines) + "\n")
    with pytest.raises(AssetError, match=f"line {bad_row + 1}: missing column.*output"):
        llm_subsets.template_subset("error-correction", 40, "hf")
    assert not (tmp_path / "llmdata" / "hf" / "templates" / "error-correction-r40.jsonl").exists()


def test_blank_lines_are_no_rows(tmp_path):
    rows = [grammar_row(i) for i in range(30)]
    path = tmp_path / "p.jsonl"
    path.write_text(
        "\n".join(json.dumps(r) + ("\n  " if i % 4 == 0 else "") for i, r in enumerate(rows))
    )
    assert readers.count_rows(path) == 30
    idx = llm_subsets.subset_indices(30, 7)
    assert readers.select_rows(path, idx, GRAMMAR_COLUMNS) == [rows[i] for i in idx]
    assert list(readers.iter_jsonl(path)) == rows


def test_json_array_files_are_read_an_element_at_a_time(tmp_path, monkeypatch):
    rows = [grammar_row(i) for i in range(400)]
    path = tmp_path / "grammar.json"
    path.write_text(json.dumps(rows, indent=2))
    monkeypatch.setattr(readers, "ARRAY_CHUNK", 100)  # elements straddle the chunks
    assert readers.read_jsonl(path, GRAMMAR_COLUMNS) == rows
    assert readers.count_rows(path) == 400
    idx = llm_subsets.subset_indices(400, 9)
    assert readers.select_rows(path, idx, GRAMMAR_COLUMNS) == [rows[i] for i in idx]
    path.write_text('[\n  {"input": "a", "output": "b"},\n  {"input": "a",\n   "output": }\n]')
    with pytest.raises(AssetError, match="line 4: Expecting value"):
        readers.read_jsonl(path)
    path.write_text('[{"input": "a", "output": "b"},\n')
    with pytest.raises(AssetError, match="not closed"):
        readers.read_jsonl(path)


# ---------------------------------------------------------------- Hugging Face parent
class FakeHFDataset:
    """len() and select() as a memory-mapped datasets.Dataset has them; iterating it whole
    (what a list of every row would need) fails the test."""

    column_names = ["input", "output"]

    def __init__(self, n: int) -> None:
        self.n = n
        self.selected: list[int] | None = None

    def __len__(self) -> int:
        return self.n

    def select(self, indices: list[int]) -> list[dict[str, str]]:
        self.selected = list(indices)
        return [grammar_row(i) for i in indices]

    def __iter__(self):
        raise AssertionError("the whole data set was iterated")

    def __getitem__(self, key):
        raise AssertionError("rows were read one by one")


def test_subset_of_a_hf_parent_uses_len_and_select(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llmdata"))
    monkeypatch.delenv("LLM_DATASETS_DIR", raising=False)
    fake = FakeHFDataset(185_000_000)  # C4-200M's size: only its length is ever asked for
    monkeypatch.setattr(readers, "load_hf", lambda ds: fake)
    path, peak = peak_bytes(lambda: llm_subsets.template_subset("error-correction", SUBSET, "hf"))
    indices = llm_subsets.subset_indices(fake.n, SUBSET)
    assert fake.selected == indices
    assert lines_of(path) == [grammar_row(i) for i in indices]
    assert peak < 2 * 1024 * 1024
    llm_subsets.dataset_config(
        "error-correction", "lora", "llama3_8b", SUBSET
    )  # no pass over the set
    fake.column_names = ["input"]
    with pytest.raises(AssetError, match="lacks column.*output"):
        readers.check_hf_available(catalog.DATASETS["grammar"])


def test_a_real_datasets_dataset_gives_the_same_rows(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    rows = [grammar_row(i) for i in range(1500)]
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llmdata"))
    monkeypatch.delenv("LLM_DATASETS_DIR", raising=False)
    monkeypatch.setattr(readers, "load_hf", lambda ds: datasets.Dataset.from_list(rows))
    path = llm_subsets.template_subset("error-correction", 50, "hf")
    assert lines_of(path) == [rows[i] for i in llm_subsets.subset_indices(1500, 50)]


def test_a_set_not_in_the_cache_is_one_error_without_the_network(tmp_path, monkeypatch):
    """The hub's offline switch is read when datasets and huggingface_hub are imported; in a rank,
    torchtune imports them before any set is loaded, without HF_HUB_OFFLINE. load_hf must not
    reach the network all the same (before: 5 HEAD requests to huggingface.co, with retries)."""
    import socket

    import datasets.config
    import huggingface_hub.constants as hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # as imported without the switch
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    tries = []

    def no_network(host, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        tries.append(host)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    environ = dict(os.environ)
    with pytest.raises(AssetError, match="not in the local Hugging Face cache"):
        readers.load_hf(catalog.DATASETS["alpaca"])
    assert tries == []
    assert datasets.config.HF_HUB_OFFLINE is False and hub.HF_HUB_OFFLINE is False  # put back
    # nor left in the environment: a later download in this process (make assets' tune
    # download, in the same test worker) failed "outgoing traffic has been disabled"
    assert environ == dict(os.environ)


# ---------------------------------------------------------------- DPO pairs of a whole set
def test_whole_set_pairs_stream(tmp_path, monkeypatch):
    n = 8_000
    folder = tmp_path / "datasets"
    folder.mkdir()
    parent = folder / "grammar.jsonl"
    parent.write_text("".join(json.dumps(grammar_row(i)) + "\n" for i in range(n)))
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llmdata"))
    monkeypatch.setenv("LLM_DATASETS_DIR", str(folder))
    llm_subsets.sft_messages(
        "grammar", grammar_row(0)
    )  # torchtune's import is not the pairs' memory
    cfg, peak = peak_bytes(
        lambda: llm_subsets.dataset_config("grammar", "dpo", "llama3_8b", SUBSET)
    )
    assert peak < 0.1 * parent.stat().st_size
    pairs = readers.read_jsonl(Path(cfg["data_files"]), ("chosen", "rejected"))
    assert len(pairs) == n
    for i in (0, 1, n // 2, n - 1):
        p = pairs[i]
        assert p["chosen"][-1]["content"] == grammar_row(i)["output"]
        assert p["rejected"][-1]["content"] == grammar_row((i + 1) % n)["output"]
        assert p["chosen"][:-1] == p["rejected"][:-1]
        assert grammar_row(i)["input"] in p["chosen"][0]["content"]


def test_streamed_pairs_match_the_pairs_of_a_list():
    rows = [grammar_row(i) for i in range(5)]
    assert list(llm_subsets.iter_preference_pairs("grammar", rows)) == list(
        llm_subsets.iter_preference_pairs("grammar", iter(rows))
    )
    one = list(llm_subsets.iter_preference_pairs("grammar", rows[:1]))
    assert one[0]["chosen"] == one[0]["rejected"]  # a single row is its own "next" row
    assert list(llm_subsets.iter_preference_pairs("grammar", [])) == []


# ---------------------------------------------------------------- token counts vs the paper's
PAPER = c.paper_table("template_subsets.csv").set_index("template")


def paper_tokens(label: str) -> int:
    return int(PAPER.loc[label, "tokens"])


def subsets(tokens: dict[str, int], rows: int, tokenizer: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"template": t, "tokenizer": tokenizer, "rows": rows, "tokens": n}
            for t, n in tokens.items()
        ]
    )


def test_counts_within_15_pct_say_so():
    ours = {"Instruct": round(1.10 * paper_tokens("Instruct")), "Summary": paper_tokens("Summary")}
    t = fig_templates.tokens_vs_paper(subsets(ours, 500, "llama3")).set_index("template")
    assert t["within"].all() and set(t["basis"]) == {"total"}
    assert t.loc["Instruct", "diff_pct"] == pytest.approx(10.0, abs=0.01)
    assert "within 15 % of the paper's" in t.loc["Instruct", "note"]
    assert "+10 %" in t.loc["Instruct", "note"] and "tokenizer llama3" in t.loc["Instruct", "note"]
    fewer = fig_templates.tokens_vs_paper(
        subsets({"Summary": round(0.8 * paper_tokens("Summary"))}, 500, "x")
    )
    assert not fewer["within"].iloc[0]
    assert "20 % fewer tokens than the paper's" in fewer["note"].iloc[0]


def test_a_byte_tokenizer_says_how_much_more():
    label = "Error Correction"
    t = fig_templates.tokens_vs_paper(
        subsets({label: round(2.6 * paper_tokens(label))}, 500, "bytes")
    )
    r = t.iloc[0]
    assert not r["within"] and r["ratio"] == pytest.approx(2.6, abs=1e-4)
    assert "+160 %" in r["note"] and "160 % more tokens than the paper's" in r["note"]
    assert "tokenizer bytes: one token per byte" in r["note"]


def test_smaller_subsets_are_compared_per_row():
    per_row = paper_tokens("Summary") / int(PAPER.loc["Summary", "rows"])
    t = fig_templates.tokens_vs_paper(subsets({"Summary": round(16 * per_row * 1.05)}, 16, "bytes"))
    r = t.iloc[0]
    assert r["basis"] == "per row" and r["within"]
    assert r["diff_pct"] == pytest.approx(5.0, abs=0.5)
    assert f"within 15 % of the paper's {per_row:.1f} per row" in r["note"]
    assert "compared per row because this subset has 16 rows" in r["note"]


def test_paper_counts_come_from_the_reference_csv(tmp_path, monkeypatch):
    (tmp_path / "template_subsets.csv").write_text(
        "template,rows,tokens,size_kb\nSummary,10,1000,1\n"
    )
    monkeypatch.setattr(c, "REFERENCE_DIR", tmp_path)
    t = fig_templates.tokens_vs_paper(subsets({"Summary": 2000, "Instruct": 5}, 10, "bytes"))
    assert t["template"].tolist() == ["Summary"]  # no paper count for Instruct: left out
    assert t["paper_tokens"].iloc[0] == 1000 and t["diff_pct"].iloc[0] == pytest.approx(100.0)


@pytest.fixture
def l5_sandbox(sandbox):
    path = sandbox / "matrix.yaml"
    m = yaml.safe_load(path.read_text())
    real = mx.load_matrix(Path(__file__).resolve().parents[1] / "experiments" / "matrix.yaml")
    m["experiments"]["L5"] = real["experiments"]["L5"]
    path.write_text(yaml.safe_dump(m))
    return sandbox


def fake_l5(tokens: dict[str, int], rows: int, tokenizer: str) -> None:
    """LoRA and DPO runs of the three templates on 1 GPU, with the counts a recipe would write."""
    listed = []
    for d in llm_spec.TEMPLATE_DATASETS:
        for m in ("lora", "dpo"):
            spec = {**llm_spec.DEFAULTS, "dataset": d, "method": m, "template_rows": rows}
            name = llm_spec.run_name(spec)
            n = tokens[catalog.TEMPLATE_LABELS[d]] * (2 if m == "dpo" else 1)
            summary = {
                "status": "ok",
                "device": "cpu",
                "tokenizer": tokenizer,
                "s_per_it": 0.1,
                "steps": 4,
                "dataset_rows": rows,
                "dataset_tokens": n,
                "model": "tiny",
                "name": name,
            }
            run = store.run_dir("test", name)
            run.mkdir(parents=True, exist_ok=True)
            store.write_json_atomic(run / store.SPEC, spec)
            store.write_json_atomic(run / store.SUMMARY, summary)
            listed.append({"run": name, "status": "ok", "reused": False})
    store.write_json_atomic(
        store.sweeps_dir("test") / "L5.json", {"experiment": "L5", "runs": listed, "skipped": []}
    )


def test_l5_writes_the_token_table_and_a_note_per_template(l5_sandbox, monkeypatch, tmp_path):
    per_row = {t: paper_tokens(t) / int(PAPER.loc[t, "rows"]) for t in PAPER.index}
    ours = {t: round(16 * v * (2.6 if t == "Summary" else 1.05)) for t, v in per_row.items()}
    fake_l5(ours, 16, "bytes")
    driver.build("fig-templates", "test")
    t = pd.read_csv(store.tables_dir("test") / "fig-templates-tokens.csv").set_index("template")
    assert list(t.index) == ["Instruct", "Summary", "Error Correction"]
    assert (t["basis"] == "per row").all() and (t["tokenizer"] == "bytes").all()
    assert t["tokens"].to_dict() == ours  # LoRA's counts, not DPO's chosen + rejected
    assert t.loc["Summary", "diff_pct"] == pytest.approx(160.0, abs=1.0)
    notes = json.loads((store.tables_dir("test") / "fig-templates.json").read_text())["notes"]
    mine = [n for n in notes if n.startswith("Tokens vs paper, ")]
    assert len(mine) == 3
    assert "Summary: " in mine[1] and "+160 %" in mine[1] and "one token per byte" in mine[1]
    assert "within 15 % of the paper's" in mine[0] and "compared per row" in mine[0]
    assert any("fig-templates-tokens.csv" in n for n in notes)

    from analysis import draw as fc
    from analysis.artifacts import fig_templates as f5

    monkeypatch.setattr(store, "REPORT_OUT_DIR", tmp_path)
    df, meta = fc.load(f5.TARGET, "test")
    assert len(f5.token_lines(meta)) == 1 + 3
    assert fc.save(f5.figure(df, meta), f5.TARGET, "test").is_file()
