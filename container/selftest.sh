#!/usr/bin/env bash
# The image's self-test (apptainer's %test; `make container-test` for the podman image): the
# hardware probe, then the CPU unit tests, on a copy of the image's code in a temporary folder
# (the image itself stays read-only) with the image's Python environment.
#   bash /artifact/container/selftest.sh [pytest args...]
set -euo pipefail
CODE=${ARTIFACT_CODE:-/artifact}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$CODE/." "$work/"
cd "$work"
echo "[selftest] nsys in this image: $(cat /etc/artifact/nsys 2>/dev/null || echo 'not recorded')"
make "VENV=${VENV:-/opt/venv}" probe
"${VENV:-/opt/venv}/bin/python" -m run.sweep.matrix --check
"${VENV:-/opt/venv}/bin/python" -m pytest -q -p no:cacheprovider -m "not integration and not gpu" \
    "$@"
