#!/bin/bash
# One device call (issue 35): make gpu-check, then reference sweeps at smoke scale on this GPU,
# everything back under $OUT in a few files. LIMIT: seconds for the whole script.
set -u
START=$(date +%s)
LIMIT=${LIMIT:-550}
left() { echo $((START + LIMIT - $(date +%s))); }
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
exec > >(tee "$OUT/console.log") 2>&1
echo "== start $(date -u +%FT%TZ)"
nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1 && [ "$PY" = python3 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
$PY - <<'EOF'
import importlib.metadata as md, torch
ok = torch.cuda.is_available()
print("torch", torch.__version__, "cuda", torch.version.cuda,
      "nccl", torch.cuda.nccl.version() if ok else "-", torch.cuda.get_device_name(0) if ok else "no cuda")
for p in ("torchtune", "torchao", "torchdata", "datasets", "pyarrow", "fsspec", "omegaconf",
          "torchvision", "pandas", "huggingface_hub"):
    try:
        print(p, md.version(p))
    except Exception as e:
        print(p, "missing", e)
import torchtune, torchao, datasets  # noqa: E401,F401
print("imports ok")
EOF
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
MODEL=$(echo "${GPU:-cpu}" | sed 's/^NVIDIA //' | tr 'A-Z ' 'a-z-')
REF=results/reference/$MODEL
echo "== gpu-check (left $(left) s)"
if command -v make >/dev/null; then
  RUN_TIMEOUT_S=${CHECK_S:-200} timeout -s TERM "${GC_S:-330}" make gpu-check PY="$PY"
else
  RUN_TIMEOUT_S=${CHECK_S:-200} timeout -s TERM "${GC_S:-330}" $PY -m run.checks
fi
echo "== gpu-check rc=$? (left $(left) s)"
# One sweep per experiment: one cut short by the clock loses only its own record (its finished
# runs stay and serve the next).
for group in V3 V4 O1 N1 N2 L8 V1 L5 V2 L6; do
  t=$(($(left) - 35))
  [ "$t" -lt 20 ] && { echo "== no time for $group"; continue; }
  echo "== sweep $group (limit $t s)"
  RESULTS_DIR=$REF timeout -s TERM "$t" $PY -m run.sweep --scale smoke $(printf -- '--exp %s ' $group)
  echo "== sweep $group rc=$?"
done
echo "== packing (left $(left) s)"
ls -la results/gpu-check "$REF/smoke" 2>/dev/null
# Small files in one archive (always back); large ones (traces) in 15 MiB parts, at most 5.
find results -type f -size -2M >/tmp/small.lst
find results -type f -size +2M -printf '%s %p\n' | sort -n | tee /tmp/big.sizes | cut -d' ' -f2- >/tmp/big.lst
tar czf "$OUT/small.tgz" -T /tmp/small.lst
if [ -s /tmp/big.lst ]; then
  tar czf /tmp/big.tgz -T /tmp/big.lst && split -b 15M -d /tmp/big.tgz "$OUT/big.tgz." &&
    ls "$OUT"/big.tgz.* | tail -n +6 | xargs -r rm -v
fi
ls -la "$OUT"; echo "== end, $(($(date +%s) - START)) s"
