"""Import torchvision next to a CPU-only torch build.

PyPI's torchvision 0.28 wheel is a CUDA build: beside the CPU torch its import dies registering
fake kernels for `torchvision::nms`. Defining the two missing schemas first lets it (and the
models, which never call them) work; a matching pair already has them.
"""

from __future__ import annotations

import torch

_LIB = None


def _has_op(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"torchvision::{name}", "")
    except RuntimeError:
        return False
    return True


def import_torchvision():  # noqa: ANN201 - returns the module
    global _LIB
    try:
        import torchvision

        return torchvision
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
    import sys

    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]
    if _LIB is None:
        _LIB = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            if not _has_op(op):
                _LIB.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import torchvision

    return torchvision
