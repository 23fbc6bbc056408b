#!/bin/bash
# `make slurm [NODES=n]`: submit PROFILE's runs to SLURM.
#   NODES=1: one job running `make all`.
#   NODES=n: a job array of n tasks, one node each, each running `make runs`: every task takes the
#   runs no other task has taken (one lock per run on the shared results folder, run/sweep/lock.py),
#   then one job, after the whole array, runs `make all`, which finds every run done (or runs
#   what a failed task left) and builds the tables, figures and report.
set -euo pipefail
NODES=${NODES:-1}
if ! [[ "$NODES" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: NODES=$NODES must be a positive integer" >&2
    exit 2
fi
command -v sbatch >/dev/null || { echo "error: sbatch not found: submit from a SLURM login node" >&2; exit 2; }
script=run/slurm/artifact.sbatch
if [[ "$NODES" == 1 ]]; then
    sbatch "$script" all
    exit 0
fi
array=$(sbatch --parsable --array="1-$NODES" "$script" runs)
array=${array%%;*}  # --parsable prints "jobid[;cluster]"
echo "submitted job array $array: $NODES nodes taking runs"
sbatch --dependency="afterany:$array" --job-name=mgpu-artifact-report "$script" all
