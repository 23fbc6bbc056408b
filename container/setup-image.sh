#!/usr/bin/env bash
# Everything both recipes do inside the image, as root, from the code copied to /artifact: the
# system packages, Nsight Systems when NVIDIA's repository can be reached, and the Python
# environment in /opt/venv (by the same script as the Makefile's .venv). The pins come in as
# environment variables named as in container/pins.env (build arguments of both recipes).
#   bash /artifact/container/setup-image.sh
set -euo pipefail
: "${PYTHON_VERSION:?}" "${NSYS_VERSION:?}" "${NSYS_REPO:?}" "${TORCH_INDEX?}" "${WHEELS?}" "${CA_BUNDLE?}"
export DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1
STATUS=/etc/artifact
if [[ -n "$CA_BUNDLE" ]]; then
    export PIP_CERT=$CA_BUNDLE CURL_CA_BUNDLE=$CA_BUNDLE
fi
mkdir -p "$STATUS"

apt-get update
# numactl binds ranks to NUMA nodes; hwloc prints the topology; git stamps provenance when the
# code is a clone; curl and gnupg fetch NVIDIA's repository key. torch.compile (the optimised
# ladders O1-O4) builds kernels: on a CPU inductor compiles C++ against Python.h, on a GPU Triton
# compiles its launcher with the C compiler; without them every compiled step is `unsupported`
# (run/node/toolchain.py). g++ brings gcc (cc), -dev brings Python.h; the base's release fixes
# their versions (Debian 12: GCC 12).
apt-get install -y --no-install-recommends \
    "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv" "python${PYTHON_VERSION}-dev" \
    g++ make git numactl hwloc-nox ca-certificates curl gnupg

# The paper's profiler. A build that cannot reach NVIDIA's repository goes on without it and
# records why: run.node.probe prints the line, and the runs fall back to torch.profiler.
nsys_status="absent: ${NSYS_REPO} could not be reached at build time"
keyring=$(mktemp)
if curl -fsSL --retry 2 -m 120 -o "$keyring" "${NSYS_REPO}/cuda-keyring_1.1-1_all.deb"; then
    dpkg -i "$keyring"
    if apt-get update && apt-get install -y --no-install-recommends "nsight-systems-${NSYS_VERSION}"; then
        nsys_bin=$(ls -d /opt/nvidia/nsight-systems/*/bin 2>/dev/null | head -1)
        if [[ -x "$nsys_bin/nsys" ]]; then
            ln -sf "$nsys_bin/nsys" /usr/local/bin/nsys
            nsys_status="installed: $("$nsys_bin/nsys" --version 2>&1 | head -1)"
        else
            nsys_status="absent: nsight-systems-${NSYS_VERSION} installed no nsys binary"
        fi
    else
        nsys_status="absent: nsight-systems-${NSYS_VERSION} is not in ${NSYS_REPO}"
    fi
fi
rm -f "$keyring"
echo "$nsys_status" > "$STATUS/nsys"
echo "[image] nsys ${nsys_status}"
rm -rf /var/lib/apt/lists/*

cd /artifact
if [[ -n "${WHEELS:-}" ]]; then
    export PIP_FIND_LINKS=$WHEELS
fi
PYTHON="python${PYTHON_VERSION}" bash container/install-python.sh /opt/venv
/opt/venv/bin/python -c "import torch, torchtune, nvidia.dali; print('[image] torch', torch.__version__)"
# what torch.compile will look for (run/node/toolchain.py asks the same): a build without it
# stops here, not at the first compiled run
/opt/venv/bin/python - <<'PY'
import sysconfig
from pathlib import Path

from torch._inductor.cpp_builder import get_cpp_compiler

header = Path(sysconfig.get_path("include")) / "Python.h"
assert header.is_file(), f"no {header}: torch.compile cannot build its kernels"
print("[image] torch.compile builds with", get_cpp_compiler(), "and", header)
PY
compiler=$(c++ --version)
echo "${compiler%%$'\n'*}" > "$STATUS/compiler"
