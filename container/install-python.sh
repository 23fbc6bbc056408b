#!/usr/bin/env bash
# The one way the artifact's Python environment is installed: the Makefile's venv, the
# Containerfile and apptainer.def all call this script. Versions: requirements.txt (the only pins).
#
#   bash container/install-python.sh VENV      # create VENV and install the pinned packages
#   bash container/install-python.sh --stamp   # the name of the stamp file a finished VENV holds
#
# TORCH_INDEX (optional) chooses the torch build: a PyTorch wheel index such as
# https://download.pytorch.org/whl/cu126. torch and torchvision then come from there, at the
# versions requirements.txt pins, and everything else from PyPI. Needed where the NVIDIA driver
# is older than the 580 series that PyPI's CUDA 13 build of torch requires.
# PYTHON: the interpreter that creates the venv (default python3). SKIP_VENV=1: VENV exists.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=requirements.txt

if [[ "${1:-}" == "--stamp" ]]; then
    # changes whenever a pin or the torch index changes, so make rebuilds the venv
    printf '.installed-%s\n' "$( (cat "$REQ"; echo "TORCH_INDEX=${TORCH_INDEX:-}") | cksum | cut -d' ' -f1)"
    exit 0
fi

VENV=${1:?usage: install-python.sh VENV | --stamp}
if [[ "${SKIP_VENV:-0}" != 1 ]]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
PIP=("$VENV/bin/pip" --quiet)
"${PIP[@]}" install --upgrade pip
if [[ -n "${TORCH_INDEX:-}" ]]; then
    mapfile -t TORCH_PINS < <(grep -E '^(torch|torchvision)==' "$REQ")
    echo "torch from ${TORCH_INDEX}: ${TORCH_PINS[*]}"
    "${PIP[@]}" install --index-url "$TORCH_INDEX" "${TORCH_PINS[@]}"
fi
# a pin without a local label is satisfied by the +cuXXX build just installed, which stays
"${PIP[@]}" install -r "$REQ"
rm -f "$VENV"/.installed-*
touch "$VENV/$(TORCH_INDEX="${TORCH_INDEX:-}" bash "$0" --stamp)"
