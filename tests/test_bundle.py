"""The archive to attach to a report (run/node/bundle.py): its members, their contents, atomicity."""

from __future__ import annotations

import json
import tarfile
from importlib import metadata
from pathlib import Path

import pytest

from run import store
from run.node import bundle, probe


def _log(folder: Path, lines: int, last: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = [f"line {i}" for i in range(1, lines)] + [last]
    (folder / store.LOG).write_text("\n".join(body) + "\n")


def _read(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_a_bundle_holds_probe_versions_log_tails_and_root_causes(sandbox):
    _log(store.run_dir("test", "run-failed"), 100, "ValueError: synthetic failure")
    _log(store.staging_dir("test", "run-killed"), 5, "killed")  # never published
    runs = [
        {"name": "a-check", "scale": "test", "run": "run-failed", "status": "failed",
         "root_cause": "ValueError: synthetic failure"},
        {"name": "b/check", "scale": "test", "run": "run-killed", "status": None,
         "root_cause": "killed (SIGKILL)"},
        {"name": "c-check", "scale": "test", "run": None, "status": None,
         "root_cause": "KeyError: 'x'", "traceback": "Traceback ...\nKeyError: 'x'\n"},
        {"name": "d-check", "scale": "test", "run": None, "status": None, "root_cause": None},
    ]  # fmt: skip
    info = probe.probe()
    path = bundle.build(store.scale_dir("test") / "bundle.tar.gz", info, runs, {"x.json": "{}"})
    got = _read(path)
    assert set(got) == {
        f"bundle/{n}"
        for n in (
            "probe.txt", "probe.json", "versions.json", "runs.json", "x.json",
            "logs/a-check.txt", "logs/b_check.txt", "logs/c-check.txt",
        )
    }  # fmt: skip
    tail = got["bundle/logs/a-check.txt"].splitlines()
    assert len(tail) == bundle.LOG_LINES and tail[0] == "line 41"
    assert tail[-1] == "ValueError: synthetic failure"
    assert got["bundle/logs/b_check.txt"].splitlines()[-1] == "killed"
    assert got["bundle/logs/c-check.txt"].endswith("KeyError: 'x'\n")
    listed = {r["name"]: r for r in json.loads(got["bundle/runs.json"])}
    assert listed["a-check"]["root_cause"] == "ValueError: synthetic failure"
    assert listed["a-check"]["log"] == "logs/a-check.txt" and listed["d-check"]["log"] is None
    assert json.loads(got["bundle/probe.json"])["cpu_count"] == info["cpu_count"]
    assert got["bundle/probe.txt"] == probe.describe(info) + "\n"
    versions = json.loads(got["bundle/versions.json"])
    need = {"driver", "driver_cuda", "torch", "torch_cuda", "nccl", "torchtune", "torchao", "dali"}
    assert need | {"nsys"} <= set(versions)
    assert versions["torchtune"] == metadata.version("torchtune")
    assert versions["torchao"] == metadata.version("torchao")
    assert all(versions[k] not in (None, "") for k in need)  # a value, or "absent: why"
    if not info["gpus"]:
        assert versions["driver"].startswith("absent: ")
    assert versions["nsys"].startswith("absent: ") == (info["nsys"] is None)


def test_nsys_absent_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(bundle.shutil, "which", lambda exe: None)
    monkeypatch.setattr(probe, "IMAGE_NSYS", tmp_path / "nsys")
    assert bundle.nsys_version() == "absent: nsys is not on the PATH"
    (tmp_path / "nsys").write_text("absent: NVIDIA's repository could not be reached\n")
    assert bundle.nsys_version() == "absent: NVIDIA's repository could not be reached"


@pytest.mark.parametrize("before", [None, "old"])
def test_a_bundle_that_fails_half_way_leaves_nothing_half_written(tmp_path, monkeypatch, before):
    path = tmp_path / "out" / "bundle.tar.gz"
    if before:
        bundle.write(path, {"b/old.txt": before})
    added = []
    real = tarfile.TarFile.addfile

    def addfile(self, info, fileobj=None):  # noqa: ANN001, ANN202
        if added:
            raise OSError(28, "No space left on device")
        added.append(info.name)
        return real(self, info, fileobj)

    monkeypatch.setattr(tarfile.TarFile, "addfile", addfile)
    with pytest.raises(OSError, match="No space left"):
        bundle.write(path, {"b/one.txt": "1", "b/two.txt": "2"})
    assert added == ["b/one.txt"]  # it did fail half-way
    left = sorted(p.name for p in path.parent.iterdir())
    if before:
        assert left == ["bundle.tar.gz"] and _read(path) == {"b/old.txt": "old"}
    else:
        assert left == []
