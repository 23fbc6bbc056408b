"""Whether this machine can build kernels for torch.compile (inductor): both workloads ask it.

Every sweep and plan asks it (a missing compiled run's state), and asking torch costs the import
of torch._inductor: 5.1 of a V1 sweep's 5.7 CPU-s with nothing to launch, on this 2-core CPU. So a
CPU node keeps the answer in the results root, keyed by what it depends on: the interpreter,
torch's version, CXX, CC, PATH and its folders' modification times (installing a compiler moves
its folder's). A GPU node asks afresh: the answer depends on the driver too, and runs dwarf it.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import importlib.metadata
import json
import os
import sys
import sysconfig
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


def cuda_available() -> bool:
    """torch.cuda.is_available(), torch imported only where device nodes exist."""
    if not gpu_nodes():
        return False
    import torch

    return torch.cuda.is_available()


@functools.lru_cache(maxsize=1)
def compile_blocker() -> str | None:
    """Why torch.compile (inductor) cannot build kernels here, or None: C++ against Python.h on a
    CPU; Triton kernels on a GPU, whose launcher needs the C compiler too."""
    gpu = gpu_nodes()
    blocker = _compiler(keep=not gpu)
    if blocker:
        return blocker
    include = Path(sysconfig.get_path("include"))
    if not (include / "Python.h").is_file():
        return f"torch.compile needs Python's headers: no Python.h in {include} (python3-dev)"
    if gpu and cuda_available():
        from torch.utils._triton import has_triton

        if not has_triton():
            return "torch.compile on a GPU needs Triton, which is not installed"
    return None


def _compiler(keep: bool) -> str | None:
    kept, key = store.results_root() / CACHE, _key()
    if keep:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return store.read_json(kept)[key]
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
        blocker = None
    except Exception as exc:  # noqa: BLE001 - any failure to find one means the same
        blocker = f"torch.compile needs a working C++ compiler, none found ({type(exc).__name__})"
    if keep and kept.parent.is_dir():
        with contextlib.suppress(OSError):  # read-only results: asked again next time
            store.write_json_atomic(kept, {key: blocker})
    return blocker
