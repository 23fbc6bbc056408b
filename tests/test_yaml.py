"""The YAML files (matrix, claims, LLM configs) are read strictly: a repeated key or a syntax error
is one line naming the file and the line, never a silent last-one-wins or a parser traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.claims import spec as cs
from run import yamlfile
from run.sweep import matrix as mx

REPO = Path(__file__).resolve().parent.parent
DUPLICATE_ID = """\
scales:
  smoke: {}
experiments:
  V1:
    title: first
  V2:
    title: second
  V1:
    title: the copy
"""
SYNTAX_ERROR = """\
scales:
  smoke: {}
experiments:
  V1:
    title: first
   workload: vision
"""


def write(tmp_path: Path, text: str, name: str = "matrix.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_duplicated_experiment_id_is_one_line_naming_it_and_both_lines(tmp_path):
    path = write(tmp_path, DUPLICATE_ID)
    with pytest.raises(mx.MatrixError) as err:
        mx.load_matrix(path)
    assert str(err.value) == f"{path}:8: duplicate key 'V1' (first at line 4)"


def test_a_duplicated_key_deeper_down_is_refused_too(tmp_path):
    text = "a:\n  b:\n    fixed: {epochs: 1, lr: 0.1, epochs: 2}\n"
    with pytest.raises(yamlfile.YamlError, match=r":3: duplicate key 'epochs' \(first at line 3\)"):
        yamlfile.load(write(tmp_path, text, "x.yaml"))


def test_a_syntax_error_is_one_line_with_file_and_line(tmp_path):
    path = write(tmp_path, SYNTAX_ERROR)
    with pytest.raises(mx.MatrixError) as err:
        mx.load_matrix(path)
    line = str(err.value)
    assert line.startswith(f"{path}:6: ") and "\n" not in line
    assert "while parsing a block mapping at line 4" in line


@pytest.mark.parametrize(
    "text, where",
    [
        ("a: [1, 2\n", ":2: "),
        ("a: 'open\n", ":2: "),
        ("a:\n\tb: 1\n", ":2: "),
        ("a: 1\x01\n", ":1: "),
        ("a: éééééé\nb: 1\x01\nc: 2\nd: 3\n", ":2: "),  # libyaml counts bytes, not characters
    ],
)
def test_every_kind_of_yaml_error_is_one_line(tmp_path, text, where):
    path = write(tmp_path, text, "x.yaml")
    with pytest.raises(yamlfile.YamlError) as err:
        yamlfile.load(path)
    assert str(err.value).startswith(f"{path}{where}") and "\n" not in str(err.value)


def test_a_missing_file_is_one_line_and_a_merge_override_is_no_duplicate(tmp_path):
    with pytest.raises(yamlfile.YamlError, match=r"nope.yaml: cannot read \(No such file"):
        yamlfile.load(tmp_path / "nope.yaml")
    text = "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n"
    assert yamlfile.load(write(tmp_path, text, "m.yaml"))["c"] == {"x": 3, "y": 2}


def test_the_real_files_load_as_before():
    import yaml

    for path in [
        mx.matrix_file(),
        cs.CLAIMS_FILE,
        *sorted((REPO / "configs" / "llm").glob("*.yaml")),
    ]:
        assert yamlfile.load(path) == yaml.safe_load(path.read_text()), path


def test_a_duplicated_claim_is_one_line(tmp_path):
    # a second `claims:` below the real ones would have replaced them all
    path = write(tmp_path, cs.CLAIMS_FILE.read_text() + "claims: []\n", "claims.yaml")
    with pytest.raises(cs.ClaimError, match=r"claims.yaml:\d+: duplicate key 'claims'"):
        cs.load(path)


@pytest.mark.parametrize("text", [DUPLICATE_ID, SYNTAX_ERROR], ids=["duplicate", "syntax"])
def test_the_matrix_check_says_it_in_one_line_and_exit_2(tmp_path, text):
    path = write(tmp_path, text)
    env = {k: v for k, v in os.environ.items() if k not in ("PROFILE", "REPEATS", "PROFILER")}
    proc = subprocess.run(
        [sys.executable, "-m", "run.sweep.matrix", "--check"],
        cwd=REPO, env={**env, "MATRIX_FILE": str(path)}, capture_output=True, text=True,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (2, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: {path}:")
