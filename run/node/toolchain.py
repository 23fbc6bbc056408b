"""Whether this machine can build kernels for torch.compile (inductor): both workloads ask it."""

from __future__ import annotations

import functools
import sysconfig
from pathlib import Path


@functools.lru_cache(maxsize=1)
def compile_blocker() -> str | None:
    """Why torch.compile (inductor) cannot build kernels here, or None: C++ against Python.h on a
    CPU; Triton kernels on a GPU, whose launcher needs the C compiler too."""
    import torch

    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        get_cpp_compiler()
    except Exception as exc:  # noqa: BLE001 - any failure to find one means the same
        return f"torch.compile needs a working C++ compiler, none found ({type(exc).__name__})"
    include = Path(sysconfig.get_path("include"))
    if not (include / "Python.h").is_file():
        return f"torch.compile needs Python's headers: no Python.h in {include} (python3-dev)"
    if torch.cuda.is_available():
        from torch.utils._triton import has_triton

        if not has_triton():
            return "torch.compile on a GPU needs Triton, which is not installed"
    return None
