"""Results stay where they belong: the report refuses tables made for another scale in one
line and writes nothing; files in tables/ that no artifact wrote are named, never fatal; a results
folder other than the checkout's results/ gets its report beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from report import build, inputs
from run import store


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "results"
    monkeypatch.setenv("RESULTS_DIR", str(root))
    return root


def table(root: Path, scale: str, target: str, made_for: str, **meta) -> Path:
    path = store.tables_dir(scale, root) / f"{target}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"target": target, "scale": made_for, **meta}))
    path.with_suffix(".csv").write_text("a\n1\n")
    return path


def test_a_table_of_another_profile_is_refused_in_one_line(results, capsys):
    table(results, "quick", "fig-loss", "quick")
    copied = table(results, "quick", "fig-vram", "smoke")
    before = sorted(p.name for p in store.tables_dir("quick", results).iterdir())
    assert build.main(["--scale", "quick"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert str(copied) in err[0] and "'smoke'" in err[0] and "'quick'" in err[0]
    # nothing written: no report, no figures, the tables as they were
    assert not store.report_dir("quick").exists()
    assert sorted(p.name for p in store.tables_dir("quick", results).iterdir()) == before


def test_every_results_folder_is_checked(results, tmp_path):
    other = tmp_path / "reference"
    table(results, "quick", "fig-vram", "quick")
    table(other, "quick", "fig-vram", "paper")
    with pytest.raises(inputs.ReportError, match=r"records scale 'paper', not 'quick'"):
        inputs.checked_roots("quick", [results, other])


def test_files_no_artifact_wrote_are_named_not_fatal(results, capsys):
    table(results, "smoke", "fig-templates", "smoke", extra=["fig-templates-tokens.csv"])
    tables = store.tables_dir("smoke", results)
    for name in ("fig-templates-tokens.csv", "notes.json", "fig-bogus.csv", ".x.json.tmp"):
        (tables / name).write_text("[]")
    assert inputs.checked_roots("smoke", None) == [results]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("note: ")
    assert "notes.json" in err[0] and "fig-bogus.csv" in err[0]
    assert "fig-templates" not in err[0] and ".x.json" not in err[0]


def test_a_broken_table_or_an_unknown_profile_is_one_line(results, capsys):
    path = table(results, "smoke", "fig-vram", "smoke")
    path.write_text("{not json")
    assert build.main(["--scale", "smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert build.main(["--scale", "bogus"]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown scale 'bogus'"
    assert not (results / "bogus").exists()


def test_the_report_of_results_elsewhere_goes_beside_them(results, monkeypatch):
    assert store.report_dir("smoke") == results / "smoke" / "report"
    assert store.figures_dir("smoke") == results / "smoke" / "report" / "figures"
    monkeypatch.setenv("RESULTS_DIR", str(store.REPO / "results"))
    assert store.report_dir("smoke") == store.REPORT_OUT_DIR / "smoke"
