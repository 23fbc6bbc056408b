"""Whether this machine can build kernels for torch.compile (inductor): both workloads ask it.

Every sweep and plan process asks it (a missing compiled run's state), and the answer costs the
import of torch._inductor: 4.4 CPU-s of a sweep's 5.3 with nothing to launch, measured on this
2-core CPU. A CPU node's answer is therefore kept in the results folder, keyed by all it depends
on: the interpreter, torch's version, CXX/CC/PATH and the modification times of PATH's folders
(installing a compiler changes its folder's). A GPU node asks afresh: there the answer also
depends on the driver and Triton, and the runs dwarf the import.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from run import store

CACHE = ".toolchain.json"  # in the results root, beside the scales' folders


def _key() -> str:
    folders = os.environ.get("PATH", "").split(os.pathsep)
    mtimes = [os.stat(f).st_mtime_ns if os.path.isdir(f) else None for f in folders]
    seen = [sys.executable, importlib.metadata.version("torch"), os.environ.get("CXX"),
            os.environ.get("CC"), folders, mtimes]  # fmt: skip
    return hashlib.sha256(json.dumps(seen).encode()).hexdigest()


def gpu_nodes() -> bool:
    """Whether this machine has NVIDIA device nodes (WSL: /dev/dxg), asked without torch: where it
    has none, torch.cuda cannot be available, and importing torch to hear so costs 2 CPU-s."""
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dxg"))


@functools.lru_cache(maxsize=1)
def compile_blocker() -> str | None:
    """Why torch.compile (inductor) cannot build kernels here, or None: C++ against Python.h on a
    CPU; Triton kernels on a GPU, whose launcher needs the C compiler too."""
    gpu = gpu_nodes()
    blocker = _compiler() if gpu else _kept(_compiler)
    if blocker:
        return blocker
    include = Path(sysconfig.get_path("include"))
    if not (include / "Python.h").is_file():
        return f"torch.compile needs Python's headers: no Python.h in {include} (python3-dev)"
    if gpu:
        import torch
        from torch.utils._triton import has_triton

        if torch.cuda.is_available() and not has_triton():
            return "torch.compile on a GPU needs Triton, which is not installed"
    return None


def _kept(ask: Callable[[], str | None]) -> str | None:
    """ask()'s answer, kept in the results root under _key() while that root exists."""
    root = store.results_root()
    key = _key()
    try:
        kept = store.read_json(root / CACHE)
        if kept["key"] == key:
            return kept["answer"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    answer = ask()
    if root.is_dir():
        try:
            store.write_json_atomic(root / CACHE, {"key": key, "answer": answer})
        except OSError:
            pass  # a read-only results folder asks again next time
    return answer


def _compiler() -> str | None:
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except Exception as exc:  # noqa: BLE001 - any failure to find one means the same
        return f"torch.compile needs a working C++ compiler, none found ({type(exc).__name__})"
    return None
