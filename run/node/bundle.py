"""One archive to attach to a report from a GPU node: what the node is, what is installed, and
why each run failed, so that a failure can be understood without access to the node.

`make gpu-check` writes results/gpu-check/bundle.tar.gz, a GPU sweep with failed runs
results/<scale>/bundles/<EXP>.tar.gz: probe.txt/json, versions.json, runs.json, logs/<name>.txt
(the last LOG_LINES of each log.txt) and the caller's own files, renamed into place whole.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

from run import store
from run.node import probe, provenance

LOG_LINES = 60
NAME = "bundle.tar.gz"


def _absent(value: Any, why: str) -> Any:
    return f"absent: {why}" if value in (None, "") else value


def nsys_version() -> str:
    """`nsys --version`, or why there is none (container/setup-image.sh records it)."""
    exe = shutil.which("nsys")
    if exe is None:
        image = probe.IMAGE_NSYS.read_text().strip() if probe.IMAGE_NSYS.is_file() else ""
        if image.startswith("absent: "):
            return image
        return "absent: nsys is not on the PATH" + (f" (the image says {image!r})" if image else "")
    return _absent(probe._cmd([exe, "--version"]), f"`{exe} --version` failed")


def versions(info: dict[str, Any]) -> dict[str, Any]:
    """The versions a GPU failure depends on; what is missing says why instead of null."""
    pkgs = provenance.versions()
    try:
        build = provenance.torch_build()
    except Exception as exc:  # noqa: BLE001 - a broken torch is what a bundle must report
        build = {"torch": f"absent: import torch failed ({type(exc).__name__}: {exc})"}
    gpus = info.get("gpus") or []
    no_cuda = "torch cannot use CUDA here" if not build.get("cuda_available") else "not reported"
    dali = pkgs.get("nvidia-dali-cuda130") or pkgs.get("nvidia-dali-cuda120")
    return {
        "driver": _absent(gpus[0].get("driver") if gpus else None, "nvidia-smi lists no GPU"),
        "driver_cuda": _absent(info.get("driver_cuda"), "nvidia-smi reports no CUDA version"),
        "torch": build.get("torch") or _absent(pkgs.get("torch"), "not installed"),
        "torch_cuda": _absent(build.get("cuda"), "a CPU build of torch"),
        "cudnn": _absent(build.get("cudnn"), no_cuda),
        "nccl": _absent(build.get("nccl"), no_cuda),
        "cuda_available": build.get("cuda_available"),
        "torchtune": _absent(pkgs.get("torchtune"), "not installed"),
        "torchao": _absent(pkgs.get("torchao"), "not installed"),
        "dali": _absent(dali, "no nvidia-dali-cuda130/cuda120 wheel installed"),
        "nsys": nsys_version(),
        "packages": pkgs,
    }


def tail(path: Path | None, lines: int = LOG_LINES) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc})\n"
    return "".join(text.splitlines(keepends=True)[-lines:])


def write(path: Path, members: dict[str, str]) -> Path:
    with store.atomic_file(path, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size, entry.mtime, entry.mode = len(data), int(time.time()), 0o644
            tar.addfile(entry, io.BytesIO(data))
    return path


def build(
    path: Path,
    info: dict[str, Any],
    runs: list[dict[str, Any]],
    files: dict[str, str] | None = None,
) -> Path:
    """Write the bundle at `path`; each of `runs` is {name, scale, run (or None), status,
    root_cause, optionally result and traceback}."""
    top = path.name.removesuffix(".tar.gz")
    try:
        described = probe.describe(info)
    except (KeyError, TypeError) as exc:  # a partial probe (a test, an early failure)
        described = f"(probe incomplete: {type(exc).__name__}: {exc}; see probe.json)"
    members = {
        "probe.txt": described + "\n",
        "probe.json": json.dumps(info, indent=2, sort_keys=True, default=str) + "\n",
        "versions.json": json.dumps(versions(info), indent=2, sort_keys=True, default=str) + "\n",
    }
    listed = []
    for r in runs:
        name = r.get("run")
        folders = (
            [store.run_dir(r["scale"], name), *store.stagings(r["scale"], name)] if name else []
        )
        log = next((f / store.LOG for f in folders if (f / store.LOG).is_file()), None)
        text = tail(log)
        if r.get("traceback"):
            text += ("\n" if text else "") + "--- traceback ---\n" + r["traceback"]
        entry = {k: r.get(k) for k in ("name", "run", "result", "status", "root_cause")}
        safe = re.sub(r"[^A-Za-z0-9._+-]", "_", r["name"]) or "run"
        entry["log"] = f"logs/{safe}.txt" if text else None
        entry["log_source"] = str(log) if log else None
        if text:
            members[entry["log"]] = text
        listed.append(entry)
    members["runs.json"] = json.dumps(listed, indent=2, default=str) + "\n"
    members.update(files or {})
    return write(path, {f"{top}/{name}": text for name, text in members.items()})
