"""`make assets` (run/assets/fetch.py) against a stand-in Hub on 127.0.0.1 (tests/fake_hub.py).

huggingface_hub is used for real (auth_check, dataset_info, hf_hub_download, and torchtune's
`tune download` in a subprocess); only the Hub is a stand-in. MNIST's downloader is replaced by a
writer of small MNIST-format files (torchvision fetches from other hosts, not the Hub).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from run.assets import fetch as fa
from run.vision import digits
from tests.fake_hub import FakeHub, Repo

REPO_ROOT = Path(__file__).resolve().parents[1]


def parquet(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def grammar_rows(start: int, n: int) -> list[dict]:
    return [{"input": f"he go {i}", "output": f"He goes {i}."} for i in range(start, start + n)]


def hub_repos() -> dict[str, Repo]:
    alpaca = [{"instruction": f"do {i}", "input": "", "output": f"done {i}"} for i in range(3)]
    samsum = [
        {"id": str(i), "dialogue": f"A: hi {i}", "summary": f"A greets {i}"} for i in range(4)
    ]
    orca = [{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}]
    return {
        # alpaca-cleaned: one JSON array on main
        "yahma/alpaca-cleaned": Repo(
            {"README.md": b"# a", "alpaca_data_cleaned.json": json.dumps(alpaca).encode()},
            kind="dataset",
        ),
        # C4-200M: Parquet shards on main; only as many as GRAMMAR_ROWS needs are fetched
        "liweili/c4_200m": Repo(
            {f"data/train-0000{k}.parquet": parquet(grammar_rows(4 * k, 4)) for k in range(3)}
            | {"data/validation-00000.parquet": parquet(grammar_rows(100, 2))},
            kind="dataset",
        ),
        # samsum: a 7z archive and a script on main, the Hub's Parquet export beside them
        "Samsung/samsum": Repo(
            {"corpus.7z": b"7z", "samsum.py": b"# script"},
            kind="dataset",
            revisions={
                "refs/convert/parquet": {
                    "samsum/train/0000.parquet": parquet(samsum),
                    "samsum/test/0000.parquet": parquet(samsum[:1]),
                }
            },
        ),
        "Open-Orca/SlimOrca-Dedup": Repo(
            {"slimorca-deduped-cleaned-corrected.jsonl": jsonl(orca * 5)}, kind="dataset"
        ),
        fa.MODEL_REPO: Repo(
            {
                "config.json": b"{}",
                **{f"model-0000{k}-of-00004.safetensors": b"w" * 64 for k in range(1, 5)},
                "original/tokenizer.model": b"tok",
                "original/consolidated.00.pth": b"never fetched",
            },
            gated=True,
        ),
    }


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Every place the fetcher and huggingface_hub write or read: under tmp_path."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf" / "tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("LLAMA3_DIR", raising=False)
    monkeypatch.setenv("LLM_DATA_ROOT", str(tmp_path / "llm"))
    monkeypatch.setenv("LLM_DATASETS_DIR", str(tmp_path / "sets"))
    monkeypatch.setenv("MNIST_DIR", str(tmp_path / "mnist"))
    use("http://127.0.0.1:9", monkeypatch)  # never huggingface.co, even where a test forgets use()
    return tmp_path


def use(hub_url: str, monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_ENDPOINT", hub_url)
    monkeypatch.setattr(constants, "ENDPOINT", hub_url)
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        hub_url + "/{repo_id}/resolve/{revision}/{filename}",
    )


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ")
    return err[0]


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


def test_datasets_fetched_as_jsonl_with_sizes_and_grammar_capped(env, monkeypatch, capsys):
    monkeypatch.setattr(fa, "GRAMMAR_ROWS", 6)
    with FakeHub(hub_repos()) as hub:
        use(hub.url, monkeypatch)
        assert fa.main(["--only", "datasets"]) == 0
    out = capsys.readouterr().out
    sets = env / "sets"
    rows = {n: [json.loads(x) for x in (sets / f"{n}.jsonl").read_text().splitlines()]
            for n in ("alpaca", "grammar", "samsum", "slimorca")}  # fmt: skip
    assert [r["output"] for r in rows["alpaca"]] == ["done 0", "done 1", "done 2"]
    assert len(rows["samsum"]) == 4  # the train file of the Parquet export, not test
    assert len(rows["slimorca"]) == 5
    # the cap: 6 rows, the first shard's 4 and two of the second; the third never downloaded
    assert [r["output"] for r in rows["grammar"]] == [f"He goes {i}." for i in range(6)]
    assert hub.fetched("train-00002.parquet") == 0
    assert hub.fetched("validation-00000.parquet") == 0
    for name in rows:
        size = (sets / f"{name}.jsonl").stat().st_size
        assert any(line.startswith(name) and fa.human(size) in line for line in out.splitlines())
    assert out.splitlines()[-1].startswith("total")
    assert [p.name for p in sets.iterdir()] and not [
        p for p in sets.iterdir() if p.name.startswith(".")
    ]


def test_second_call_skips_what_is_complete_and_finishes_the_rest(env, monkeypatch, capsys):
    with FakeHub(hub_repos()) as hub:
        use(hub.url, monkeypatch)
        hub.fail["samsum/train/0000.parquet"] = 451  # not one the client retries
        assert fa.main(["--only", "datasets"]) == 2
        line = one_error_line(capsys)
        assert "HTTP 451" in line and "samsum" in line
        sets = env / "sets"
        # alpaca and grammar done, samsum not half-written, slimorca not started
        assert sorted(p.name for p in sets.iterdir()) == ["alpaca.jsonl", "grammar.jsonl"]
        before = list(hub.requests)
        del hub.fail["samsum/train/0000.parquet"]
        assert fa.main(["--only", "datasets"]) == 0
        again = hub.requests[len(before) :]
        assert not [p for m, p in again if "alpaca" in p or "c4_200m" in p]
        assert (sets / "samsum.jsonl").is_file() and (sets / "slimorca.jsonl").is_file()
        assert "already there" in capsys.readouterr().out


def test_no_token_one_line_nothing_written(env, monkeypatch, capsys):
    with FakeHub(hub_repos()) as hub:
        use(hub.url, monkeypatch)
        assert fa.main([]) == 2
        assert not hub.requests  # refused before asking the Hub anything
    assert "no Hugging Face token" in one_error_line(capsys)
    assert files_under(env / "llm") == [] and files_under(env / "sets") == []
    assert files_under(env / "mnist") == []


def test_licence_not_accepted_one_line_nothing_written(env, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_not_accepted")
    with FakeHub(hub_repos()) as hub:
        use(hub.url, monkeypatch)
        assert fa.main([]) == 2
    line = one_error_line(capsys)
    assert "403" in line and "accept the licence" in line
    assert files_under(env / "llm") == [] and files_under(env / "sets") == []


def test_no_network_one_line(env, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    use(f"http://127.0.0.1:{port}", monkeypatch)
    assert fa.main(["--only", "model"]) == 2
    assert "cannot reach" in one_error_line(capsys)
    assert fa.main(["--only", "datasets"]) == 2
    assert "cannot reach" in one_error_line(capsys)
    assert files_under(env / "sets") == []


def test_other_http_errors_named(env, monkeypatch, capsys):
    repos = hub_repos()
    del repos["Open-Orca/SlimOrca-Dedup"]
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    with FakeHub(repos) as hub:
        use(hub.url, monkeypatch)
        assert fa.main(["--only", "datasets"]) == 2
        assert "Open-Orca/SlimOrca-Dedup: repository not found" in one_error_line(capsys)
        monkeypatch.setenv("HF_TOKEN", "hf_revoked")
        repos["Open-Orca/SlimOrca-Dedup"] = Repo({"x.jsonl": b"{}\n"}, kind="dataset")
        assert fa.main(["--only", "datasets"]) == 2  # the set's rows lack 'conversations'
        assert "missing column(s) conversations" in one_error_line(capsys)
    assert not (env / "sets" / "slimorca.jsonl").exists()


def test_mnist_staged_then_renamed_and_failure_leaves_nothing(env, monkeypatch, capsys):
    monkeypatch.setattr(fa, "MNIST_COUNTS", {"train": 8, "test": 4})

    class Fake:
        fail = True

        class datasets:  # noqa: N801 - torchvision's attribute name
            @staticmethod
            def MNIST(root: str, download: bool) -> None:  # noqa: N802
                if Fake.fail:
                    raise OSError("<urlopen error [Errno -3] Temporary failure in name resolution>")
                digits.generate(Path(root), 8, 4)

    monkeypatch.setattr("run.vision.tvcompat.import_torchvision", lambda: Fake)
    assert fa.main(["--only", "mnist"]) == 2
    assert "name resolution" in one_error_line(capsys)
    assert not (env / "mnist").exists()
    Fake.fail = False
    assert fa.main(["--only", "mnist"]) == 0
    assert digits.existing_counts(env / "mnist") == {"train": 8, "test": 4}
    assert not (env / "mnist.partial").exists()
    assert fa.main(["--only", "mnist"]) == 0
    assert "already there" in capsys.readouterr().out


def test_model_with_tune_download_then_skipped(env, monkeypatch, capsys):
    """torchtune's own `tune download` (a subprocess) against the stand-in: the safetensors,
    config and tokenizer, not original/consolidated.00.pth; renamed into place; a second call
    asks the Hub nothing."""
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    with FakeHub(hub_repos(), max_seconds=120) as hub:
        use(hub.url, monkeypatch)
        assert fa.main(["--only", "model"]) == 0, capsys.readouterr().err
        folder = env / "llm" / "Meta-Llama-3-8B-Instruct"
        assert fa.model_complete(folder)
        assert not (folder / "original" / "consolidated.00.pth").exists()
        assert hub.fetched("consolidated.00.pth") == 0
        assert not folder.with_name(folder.name + ".partial").exists()
        out = capsys.readouterr().out
        assert f"LLAMA3_DIR={folder}" in out
        n = len(hub.requests)
        monkeypatch.delenv("HF_TOKEN")  # a complete model needs no token
        assert fa.main(["--only", "model"]) == 0
        assert len(hub.requests) == n
        assert "already there" in capsys.readouterr().out


def test_module_runs_as_make_assets_does(env, monkeypatch):
    """The command line `make assets` runs: a fresh process that reads HF_ENDPOINT itself."""
    with FakeHub(hub_repos()) as hub:
        proc = subprocess.run(
            [sys.executable, "-m", "run.assets", "--only", "datasets"],
            cwd=REPO_ROOT,
            env={**dict(__import__("os").environ), "HF_ENDPOINT": hub.url,
                 "PYTHONPATH": str(REPO_ROOT), "HF_HUB_CACHE": str(env / "hf" / "hub")},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        sum(
            1
            for line in proc.stdout.splitlines()
            if line.startswith(("alpaca", "grammar", "samsum", "slimorca"))
        )
        == 4
    )


def test_plan_counts_llama3_stand_ins():
    from run.sweep.plan import PlanRow, render

    def row(name: str) -> PlanRow:
        return PlanRow(name, "llm", "missing", 1, 10.0, 5, 1, ["L1"])

    info = {"gpu_count": 4, "gpu_model": "H100"}
    real = row("llama3_8b-lora-alpaca-1gpu-nopin-tok_llama3")
    stand = row("llama3_8b-lora-alpaca-1gpu-nopin-random-tok_bytes")
    rand = row("llama3_8b-lora-samsum-1gpu-nopin-random-tok_llama3")
    text = render([real, stand, rand], info, "quick")
    assert "2 run(s) with random weights, 1 with the byte tokenizer" in text
    assert "make assets" in text
    assert "stand-ins" not in render([real, row("tiny-lora-alpaca-1gpu-nopin")], info, "quick")


def test_report_counts_llama3_stand_ins(tmp_path):
    from report import build
    from run import store

    runs = store.runs_dir("quick", tmp_path)
    for name, weights, tok in (
        ("llama3_8b-lora-alpaca-1gpu-nopin-random-tok_bytes", "random", "bytes"),
        ("llama3_8b-lora-grammar-1gpu-nopin-random-tok_llama3", "random", "llama3"),
        ("llama3_8b-lora-samsum-1gpu-nopin-tok_llama3", "real", "llama3"),
        ("tiny-lora-alpaca-1gpu-nopin", "tiny", "bytes"),  # the tiny model's bytes are no stand-in
    ):
        store.write_json_atomic(runs / name / store.SPEC, {"workload": "llm"})
        summary = {"status": "ok", "weights": weights, "tokenizer": tok}
        store.write_json_atomic(runs / name / store.SUMMARY, summary)
    assert build.stand_ins(tmp_path, "quick") == {"random weights": 2, "byte tokenizer": 1}
    assert build.stand_ins(tmp_path, "paper") == {}


def test_a_gated_data_set_points_to_its_own_licence_page():
    import requests
    from huggingface_hub.errors import GatedRepoError

    from run.assets import fetch as fetch_assets

    response = requests.Response()
    response.status_code = 403
    response.request = requests.Request("GET", "http://127.0.0.1/x").prepare()
    exc = GatedRepoError("gated", response=response)
    msg = str(fetch_assets.explain(exc, "yahma/alpaca-cleaned/alpaca_data_cleaned.json"))
    assert "https://huggingface.co/yahma/alpaca-cleaned " in msg
    assert fetch_assets.MODEL_REPO not in msg
