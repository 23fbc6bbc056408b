#!/usr/bin/env bash
# What `apptainer run artifact.sif TARGET...` and `podman run IMAGE TARGET...` do: `make TARGET...`
# in a writable working directory, never inside the image (which is read-only under Apptainer).
# The working directory is ARTIFACT_WORKDIR when set, else the current one. It is either a clone
# of the artifact (its own code and results are used) or an empty or new folder, which gets a copy
# of the image's code first. The Python environment is the image's (/opt/venv): make installs
# nothing.
set -euo pipefail
CODE=${ARTIFACT_CODE:-/artifact}
WORK=${ARTIFACT_WORKDIR:-$PWD}

is_clone() { [[ -f "$1/Makefile" && -f "$1/experiments/matrix.yaml" ]]; }

if ! is_clone "$WORK"; then
    if [[ -d "$WORK" && -n "$(ls -A "$WORK" 2>/dev/null)" ]]; then
        echo "error: $WORK is neither a clone of the artifact nor empty; run from your clone" \
             "or set ARTIFACT_WORKDIR to a new or empty folder" >&2
        exit 2
    fi
    mkdir -p "$WORK" 2>/dev/null || { echo "error: cannot create $WORK" >&2; exit 2; }
    echo "[artifact] copying the image's code into $WORK" >&2
    cp -R "$CODE/." "$WORK/"
fi
if ! [[ -w "$WORK" ]]; then
    echo "error: $WORK is not writable: results are written there" >&2
    exit 2
fi
cd "$WORK"
exec make "VENV=${VENV:-/opt/venv}" "${@:-help}"
