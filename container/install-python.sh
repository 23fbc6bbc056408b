#!/usr/bin/env bash
# The one way the artifact's Python environment is installed: the Makefile's venv, the
# Containerfile and apptainer.def all call this script. Versions: requirements.txt (the only pins).
#
#   bash container/install-python.sh VENV      # create VENV and install the pinned packages
#   bash container/install-python.sh --stamp   # the name of the stamp file a finished VENV holds
#   bash container/install-python.sh --requirements   # requirements.txt as this torch build takes it
#
# TORCH_INDEX (optional) chooses the torch build: a PyTorch wheel index such as
# https://download.pytorch.org/whl/cu126. torch and torchvision then come from there, at the
# versions requirements.txt pins, and everything else from PyPI. Needed where the NVIDIA driver
# is older than the 580 series that PyPI's CUDA 13 build of torch requires. Its default is the
# TORCH_INDEX line of container/pins.env.
# PYTHON: the interpreter that creates the venv (default python3). SKIP_VENV=1: VENV exists.
set -euo pipefail
cd "$(dirname "$0")/.."
REQ=requirements.txt

# requirements.txt as this torch build installs it. DALI's wheel is built per CUDA major:
# requirements.txt pins the CUDA 13 flavour, PyPI torch's; a cu12x index (cu126, cu128) gets the
# cuda120 flavour of the same version.
requirements() {
    if [[ "${TORCH_INDEX:-}" =~ /cu(1[0-9])[0-9]/?$ ]]; then
        sed -E "s/^nvidia-dali-cuda[0-9]+==/nvidia-dali-cuda${BASH_REMATCH[1]}0==/" "$REQ"
    else
        cat "$REQ"
    fi
}

case "${1:-}" in
    --stamp)
        # named after what is installed (the requirements as this torch build takes them, and
        # the index), not after file times: a clone checked out after an image was built
        # still finds the image's environment current
        printf '.installed-%s\n' "$( (requirements; echo "TORCH_INDEX=${TORCH_INDEX:-}") | cksum | cut -d' ' -f1)"
        exit 0
        ;;
    --requirements)
        requirements
        exit 0
        ;;
esac

VENV=${1:?usage: install-python.sh VENV | --stamp | --requirements}
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
req=$(mktemp)
trap 'rm -f "$req"' EXIT
requirements > "$req"
# a pin without a local label is satisfied by the +cuXXX build just installed, which stays
"${PIP[@]}" install -r "$req"
rm -f "$VENV"/.installed-*
touch "$VENV/$(TORCH_INDEX="${TORCH_INDEX:-}" bash "$0" --stamp)"
