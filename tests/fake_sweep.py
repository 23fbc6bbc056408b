"""`python tests/fake_sweep.py ARGS` = `python -m run.sweep ARGS` with tests/fake_vision.py as
the vision entry point, so that a test can kill a real sweep process cheaply."""

from __future__ import annotations

import sys
from pathlib import Path

FAKE = Path(__file__).with_name("fake_vision.py")


def fake_launch(spec, run_dir, info):  # noqa: ANN001, ANN201
    return [
        sys.executable,
        str(FAKE),
        "--spec",
        str(run_dir / "spec.json"),
        "--run-dir",
        str(run_dir),
    ]


def patch() -> None:
    from run.vision import launch as vision_launch

    vision_launch.launch_command = fake_launch


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    patch()
    from run.sweep import runner as sweep

    sys.exit(sweep.main(sys.argv[1:]))
