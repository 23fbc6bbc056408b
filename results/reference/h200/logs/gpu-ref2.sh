#!/bin/bash
# Second device call (issue 35): the LLM checks that the first call's Makefile PYTHONPATH kept
# from torchtune. The 8B check first, in its own results folder; then the tiny-llama checks.
set -u
START=$(date +%s); LIMIT=${LIMIT:-235}
left() { echo $((START + LIMIT - $(date +%s))); }
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/console2.log") 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site
echo "== 8b (left $(left) s)"
RESULTS_DIR=results/gpu-check-8b RUN_TIMEOUT_S=150 timeout -s TERM 160 \
  python3 -m run.checks --only llm-llama3-8b-lora
echo "== 8b rc=$? (left $(left) s)"
t=$(($(left) - 15))
RESULTS_DIR=results/gpu-check-llm RUN_TIMEOUT_S=60 timeout -s TERM "$t" python3 -m run.checks \
  --only llm-lora --only llm-qlora --only llm-dpo --only llm-lora-distributed-1rank \
  --only llm-dpo-distributed --only llm-qat-distributed
echo "== llm rc=$? (left $(left) s)"
find results -type f -size -3M >/tmp/small.lst
find results -type f -size +3M -printf '%s %p\n' | sort -n | tee /tmp/big.sizes | cut -d' ' -f2- >/tmp/big.lst
tar czf "$OUT/small2.tgz" -T /tmp/small.lst
[ -s /tmp/big.lst ] && tar czf /tmp/big.tgz -T /tmp/big.lst && split -b 15M -d /tmp/big.tgz "$OUT/big2.tgz." &&
  ls "$OUT"/big2.tgz.* | tail -n +5 | xargs -r rm -v
ls -la "$OUT"; echo "== end, $(($(date +%s) - START)) s"
