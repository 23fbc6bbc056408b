#!/bin/bash
# `make slurm [NODES=n]`: submit PROFILE's runs to SLURM.
#   NODES=1: one job running `make all`.
#   NODES=n: a job array of n tasks, one node each, each running `make runs`: every task takes the
#   runs no other task has taken (one lock per run on the shared results folder, run/sweep/lock.py),
#   then one job, after the whole array, runs `make all`, which finds every run done (or runs
#   what a failed task left) and builds the tables, figures and report.
# SBATCH_OPTS: options given to every sbatch call before the script, so they override its #SBATCH
#   lines: the place for a site's --partition, --account, --qos, --time or --output (split on
#   spaces; no quoting). PROFILE and ARTIFACTS (a subset of the targets), when set, go to every
#   job's make. The `slurm` test tier (tests/test_slurm_cluster.py) runs this on a real cluster.
# Bad input (NODES, an SIF that is not there, no sbatch) is one line on stderr, exit 2, and
# nothing is submitted.
set -euo pipefail
NODES=${NODES:-1}
die() { echo "error: $*" >&2; exit 2; }
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "NODES=$NODES must be a positive integer"
# An image asked for by name must be there: the job would otherwise run on the clone's .venv
# without saying so. The default (artifact.sif) may be absent: then the .venv is meant.
if [[ -n "${SIF:-}" && ! -f "$SIF" ]]; then
    die "SIF=$SIF does not exist: build it with make sif, or leave SIF unset to use the clone's .venv"
fi
command -v sbatch >/dev/null || die "sbatch not found: submit from a SLURM login node"
read -ra opts <<< "${SBATCH_OPTS:-}"
# sbatch hands this environment to the jobs: make's own variables (MAKEFLAGS with a jobserver's
# file descriptors, MAKELEVEL) would make each job's make a broken sub-make of this one.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
script=run/slurm/artifact.sbatch
if [[ "$NODES" == 1 ]]; then
    sbatch "${opts[@]}" "$script" all
    exit 0
fi
array=$(sbatch --parsable --array="1-$NODES" "${opts[@]}" "$script" runs)
array=${array%%;*}  # --parsable prints "jobid[;cluster]"
echo "submitted job array $array: $NODES nodes taking runs"
sbatch --dependency="afterany:$array" --job-name=mgpu-artifact-report "${opts[@]}" "$script" all
