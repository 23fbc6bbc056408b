#!/usr/bin/env bash
# The image's self-test (apptainer's %test; `make container-test` for the podman image): the
# hardware probe, the CPU unit tests, then one compiled training run (torch.compile of the
# vision step, as the optimised ladders O1-O4 run it: inductor builds C++ kernels with the
# image's compiler), on a copy of the image's code in a temporary folder (the image itself stays
# read-only) with the image's Python environment.
#   bash /artifact/container/selftest.sh [pytest args for the unit tests...]
set -euo pipefail
CODE=${ARTIFACT_CODE:-/artifact}
PY=${VENV:-/opt/venv}/bin/python
# a test of the integration tier, whose run must compile (compile_s > 0) and train (status ok)
COMPILED_STEP=tests/test_vision_optimized.py::test_compiled_steps_are_timed_apart_and_out_of_images_per_s
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$CODE/." "$work/"
cd "$work"
echo "[selftest] nsys in this image: $(cat /etc/artifact/nsys 2>/dev/null || echo 'not recorded')"
echo "[selftest] C/C++ compiler: $(cat /etc/artifact/compiler 2>/dev/null || echo 'not recorded')"
make "VENV=${VENV:-/opt/venv}" probe
"$PY" -m run.sweep.matrix --check
"$PY" -m pytest -q -p no:cacheprovider -m "not integration and not gpu" "$@"
echo "[selftest] one compiled training run: $COMPILED_STEP"
"$PY" -m pytest -q -p no:cacheprovider "$COMPILED_STEP"
