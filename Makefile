# Reproduction artifact: profiling and optimising multi-GPU ML jobs.
# `make` lists the targets. `make all` runs every experiment and builds the report; `make test`
# runs the tests. Both create the virtual environment they need (pins: requirements.txt).

.DEFAULT_GOAL := help
SHELL := /bin/bash
.DELETE_ON_ERROR:

# Paper scale on a GPU node, CPU smoke scale elsewhere. Override: make all PROFILE=quick
# (asked once: `?=` would ask nvidia-smi at every use)
ifeq ($(origin PROFILE),undefined)
PROFILE := $(shell nvidia-smi -L >/dev/null 2>&1 && echo paper || echo smoke)
endif
# Which profiler the profiled experiments (V5, V6, L3, L4, L7, L9) use: auto = nsys when on the
# PATH, else torch.profiler. Setting it applies it to every run of the targets you make.
PROFILER ?=
PYTHON ?= python3
CONTAINER_ENGINE ?= $(shell command -v podman || command -v docker || echo podman)
VENV ?= .venv
PY := $(VENV)/bin/python
# Pins: Python packages in requirements.txt; the base image, Python, nsys and the torch build in
# container/pins.env, one file for this Makefile, the Containerfile and apptainer.def.
# The torch build: empty = PyPI's (CUDA 13: NVIDIA driver 580 or newer); for an older driver a
# PyTorch wheel index, e.g. TORCH_INDEX=https://download.pytorch.org/whl/cu126.
PINS := container/pins.env
pin = $(shell sed -n 's/^$(1)=//p' $(PINS))
TORCH_INDEX ?= $(call pin,TORCH_INDEX)
export TORCH_INDEX
VENV_STAMP := $(VENV)/$(shell bash container/install-python.sh --stamp)
# Where runs, sweeps and tables go (run/store.py reads the same variable).
RESULTS_DIR ?= results
RES := $(RESULTS_DIR)/$(PROFILE)
TABLES := $(RES)/tables
SWEEPS := $(RES)/sweeps
# The report of this checkout's results/ goes to report/out/<scale>; the report of any other
# RESULTS_DIR beside its results, in <RESULTS_DIR>/<scale>/report, so that results elsewhere
# never overwrite this one's report. run/store.py (report_dir) is the same rule.
REPORT_OUT := $(if $(filter $(CURDIR)/results,$(abspath $(RESULTS_DIR))),report/out/$(PROFILE),$(RES)/report)
FIGS := $(REPORT_OUT)/figures
REPORT_MD := $(REPORT_OUT)/report.md
# a PYTHONPATH given (carried wheels on an offline GPU node: README) is kept, after the repo
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
export PYTHONUNBUFFERED := 1
# How ranks are bound to NUMA nodes (run/node/numa.py): auto = bind when numactl is installed and the
# machine has more than one node; bind; off.
NUMA ?= auto
export PROFILER RESULTS_DIR NUMA
# What `make assets` fetched is used when it is there (the model folder appears only complete,
# by a rename; each data set file is written atomically, though its folder may be empty):
# Llama3-8B weights and tokenizer instead of random weights and the byte tokenizer, the parent
# data sets as JSON Lines. Set the variables to use copies elsewhere.
LLM_DATA := $(or $(LLM_DATA_ROOT),data/llm)
LLAMA3_DIR ?= $(wildcard $(LLM_DATA)/Meta-Llama-3-8B-Instruct)
LLM_DATASETS_DIR ?= $(wildcard $(LLM_DATA)/datasets)
$(if $(LLAMA3_DIR),$(eval export LLAMA3_DIR))
$(if $(LLM_DATASETS_DIR),$(eval export LLM_DATASETS_DIR))

# Sources whose change may change a run: a sweep re-checks its runs (finished ones are kept).
# The floors a run is made of (run/store.py, errors.py, node/, sweep/, vision/, llm/), at any depth;
# the benchmarks, checks and asset fetching above them change no run.
RUN_SRC := experiments/matrix.yaml run/store.py run/errors.py run/settings.py run/yamlfile.py $(wildcard configs/llm/*.yaml) \
           $(shell find run/node run/sweep run/vision run/llm -name '*.py' 2>/dev/null)
# the drawing code changes figures only: a table does not wait on it
DRAW_SRC := $(wildcard analysis/draw*.py)
ANALYSIS_SRC := $(filter-out $(DRAW_SRC),$(wildcard analysis/*.py analysis/claims/*.py analysis/profiles/*.py)) \
                reference/paper/claims.yaml
# Each spec run REPEATS times with seeds seed, seed+1, ...: tables show medians and min-max.
REPEATS ?= 1
export REPEATS
# Not a file (and never made): whatever depends on it is out of date.
FORCE:

# Every setting (run/settings.py) is checked when make starts, on every call, done target or not:
# a bad value stops make in one line, exit 2, before anything is written (the venv included).
# $(shell) does not see the command line's variables (GNU make < 4.4 hands them to recipes only),
# so they are passed to it. run.settings imports the standard library alone (PyYAML only to check
# PROFILE, and it reads the matrix without it when there is no venv yet): python3 will do.
cmdline_env := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)='$(subst ','\'',$($(v)))'))
in_env = env $(cmdline_env) $(1)
SETTINGS_ERROR := $(shell $(call in_env,$(if $(wildcard $(PY)),$(PY),$(PYTHON))) -m run.settings --check 2>&1)
$(if $(SETTINGS_ERROR),$(error $(strip $(patsubst error:,,$(SETTINGS_ERROR)))))

# Every artifact: make target -> experiment(s), read from experiments/matrix.yaml (the only place
# the map is written; experiments/targets.awk parses it before any venv exists). A target is
# built when analysis/artifacts/<target>.py exists; a fig-* target also draws its figure.
MATRIX_TARGETS := $(shell awk -f experiments/targets.awk experiments/matrix.yaml)
field = $(word $(1),$(subst :, ,$(2)))
$(foreach t,$(MATRIX_TARGETS),$(eval exp_$(call field,1,$(t)) += $(call field,2,$(t))))
$(foreach t,$(MATRIX_TARGETS),$(eval workload_$(call field,1,$(t)) := $(call field,3,$(t))))
uniq = $(if $(1),$(firstword $(1)) $(call uniq,$(filter-out $(firstword $(1)),$(1))))
ALL_TARGETS := $(call uniq,$(foreach t,$(MATRIX_TARGETS),$(call field,1,$(t))))
ARTIFACTS := $(foreach t,$(ALL_TARGETS),$(if $(wildcard analysis/artifacts/$(subst -,_,$(t)).py),$(t)))
# ARTIFACTS given on the command line (`make slurm ARTIFACTS=...`): a name that is no target of
# the matrix stops make here, in one line, before anything runs or is submitted.
ifneq ($(filter-out $(ALL_TARGETS),$(ARTIFACTS)),)
$(error ARTIFACTS: $(filter-out $(ALL_TARGETS),$(ARTIFACTS)) is no target of experiments/matrix.yaml (make help lists them))
endif
FIG_TARGETS := $(filter fig-%,$(ARTIFACTS))
TABLE_TARGETS := $(filter-out $(FIG_TARGETS),$(ARTIFACTS))
VISION := $(foreach t,$(ARTIFACTS),$(if $(filter vision,$(workload_$(t))),$(t)))
LLM := $(foreach t,$(ARTIFACTS),$(if $(filter llm,$(workload_$(t))),$(t)))
outputs = $(foreach t,$(1),$(TABLES)/$(t).csv $(if $(filter $(t),$(FIG_TARGETS)),$(FIGS)/$(t).png))
# Results folders the report sets side by side (one column per machine), e.g.
# make report REPORT_RESULTS="results results/reference/h100". Default: this machine's.
REPORT_RESULTS ?= $(RESULTS_DIR)

# The report is a file, made from the tables and figures it reads: those the goals of this call
# make, and those already there, taken as they are (an empty rule: `make fig-x` re-checks no other
# target's sweep), and from its own sources. So an artifact target is up to date once its outputs
# and the report are, and `make -q fig-x` says so.
goals_all := $(ARTIFACTS)
goals_vision := $(VISION)
goals_llm := $(LLM)
MADE := $(call outputs,$(foreach g,$(MAKECMDGOALS),$(or $(goals_$(g)),$(filter $(ARTIFACTS),$(g)))))
THERE := $(filter-out $(MADE) $(MAKECMDGOALS),$(wildcard $(FIGS)/*.png) \
           $(foreach r,$(REPORT_RESULTS),$(wildcard $(r)/$(PROFILE)/tables/*.json)))
REPORT_SRC := $(wildcard report/*.py report/templates/*) experiments/assumptions.yaml \
              experiments/matrix.yaml reference/paper/claims.yaml
RENDER = $(PY) -m report.build --scale $(PROFILE) $(addprefix --results ,$(REPORT_RESULTS))

# What is left to run: make asks run/sweep/left.py, the reading of what is missing that the plan
# and the sweep share, which sweeps of this call's goals must run, and forces those. File times
# alone miss a run folder deleted or a summary.json corrupted under a newer record, a setting that
# renames runs (PROFILER, REPEATS, LLAMA3_DIR, ...), a cell this machine can now or no longer run;
# so what `make plan` lists as missing is what make runs. Goals that reach no sweep (help, plan,
# test, report, ...) do not ask; before the venv exists, every sweep is left. Every table reads
# the noise cells (table-noise's experiments, analysis/noise.py), so every table's goal needs them.
NOISE_EXPS := $(exp_table-noise)
goal_targets = $(or $(goals_$(1)),$(filter $(ARTIFACTS),$(1)),\
  $(patsubst $(TABLES)/%.csv,%,$(filter $(TABLES)/%.csv,$(1))),$(patsubst $(FIGS)/%.png,%,$(filter $(FIGS)/%.png,$(1))))
GOAL_TARGETS := $(foreach g,$(MAKECMDGOALS),$(call goal_targets,$(g)))
GOAL_EXPS := $(strip $(call uniq,$(foreach t,$(GOAL_TARGETS),$(exp_$(t))) $(if $(GOAL_TARGETS),$(NOISE_EXPS)) \
               $(patsubst $(SWEEPS)/%.json,%,$(filter $(SWEEPS)/%.json,$(MAKECMDGOALS)))))
ifneq ($(GOAL_EXPS),)
LEFT := $(if $(wildcard $(VENV_STAMP)),$(shell $(call in_env,$(PY)) -m run.sweep.left \
          --scale $(PROFILE) $(addprefix --exp ,$(GOAL_EXPS)) 2>&1),stale: $(GOAL_EXPS))
ifneq ($(firstword $(LEFT)),stale:)
$(error $(strip $(patsubst error:,,$(LEFT))))
endif
STALE := $(wordlist 2,$(words $(LEFT)),$(LEFT))
endif
$(foreach e,$(STALE),$(eval $(SWEEPS)/$(e).json: FORCE))

.PHONY: help all vision llm report test test-unit test-faults test-gpu lint format probe venv matrix clean \
        clean-results bench-vision bench-loaders bench-analysis bench-profiler bench-optimize data-mnist assets container \
        container-test container-local sif slurm slurm-deps test-slurm \
        plan plan-brief check-cuda check-verdicts spread-sweeps gpu-check gpu-wheels self-check pdf runs $(ALL_TARGETS)

help: ## show this help
	@echo "Usage: make <target> [PROFILE=smoke|quick|paper (the scale)] [PROFILER=auto|torch|nsys|none] [REPEATS=n]"
	@echo "PROFILE now: $(PROFILE)"
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-24s %s\n", $$1, $$2}'
	@echo "One target per artifact (experiments/matrix.yaml$(if $(filter-out $(ARTIFACTS),$(ALL_TARGETS)),; not implemented yet: $(filter-out $(ARTIFACTS),$(ALL_TARGETS)))):"
	@awk -v help=1 -f experiments/targets.awk experiments/matrix.yaml

# Every table's verdicts are judged against the run-to-run spread of the same results, measured
# between runs of identical work (analysis/noise.py): the noise cells (N1/N2, target table-noise)
# run before any table is made. In `make all` (and check-verdicts) every sweep runs before the
# first table, and the noise cells' repeats are spread over them (`spread`): repeat 0 first,
# repeat 1 between the vision and the LLM experiments, the last with their own sweep at the end,
# and with it their runs beside a busy core (`busy_repeats`, run/node/busy.py; --only-repeat skips them).
# A stamp is remade when a noise cell is missing (STALE), so a rerun keeps the spread.
$(SWEEPS)/.noise-%: $(RUN_SRC) | $(VENV_STAMP)
	$(PY) -m run.sweep --scale $(PROFILE) $(addprefix --exp ,$(exp_table-noise)) --only-repeat $*
	@mkdir -p $(@D) && touch $@
$(if $(filter $(NOISE_EXPS),$(STALE)),$(foreach k,0 1,$(eval $(SWEEPS)/.noise-$(k): FORCE)))
sweeps_of = $(foreach t,$(1),$(foreach e,$(exp_$(t)),$(SWEEPS)/$(e).json))
spread = $(SWEEPS)/.noise-0 $(call sweeps_of,$(filter $(VISION),$(1))) $(SWEEPS)/.noise-1 \
         $(call sweeps_of,$(filter-out table-noise,$(filter $(LLM),$(1)))) $(NOISE_SWEEPS)

# Only when a sweep is left: first the CUDA check (a torch that cannot use the node's GPUs stops
# here, before any run), then the plan (a serial make builds prerequisites left to right, so what
# the GPUs will cost is on the terminal, and in a SLURM log, before the first run starts), then
# every sweep in the spread order. With nothing left, none of them: `make -q all` exits 0 and a
# finished `make all` returns at once.
all: $(if $(STALE),check-cuda plan-brief $(call spread,$(ARTIFACTS))) $(call outputs,$(ARTIFACTS)) $(REPORT_MD) ## run every experiment, build every table, figure and the report

vision: $(if $(STALE),check-cuda) $(call outputs,$(VISION)) $(REPORT_MD) ## only the vision experiments (V*), then the report

llm: $(if $(STALE),check-cuda) $(call outputs,$(LLM)) $(REPORT_MD) ## only the LLM experiments (L*), then the report

# Every missing run of the built artifacts in one sweep, no tables: what each node of
# `make slurm NODES=n` does. Sweeps sharing the results folder split the runs by their locks.
runs: check-cuda | $(VENV_STAMP) ## only the runs of PROFILE (no tables, no report); several at once share the work
	$(PY) -m run.sweep --scale $(PROFILE) $(addprefix --exp ,$(call uniq,$(foreach t,$(ARTIFACTS),$(exp_$(t)))))

# ARTIFACTS on the command line: only the runs those targets make (the noise cells included).
PLAN_EXPS := $(if $(filter command line,$(origin ARTIFACTS)),$(call uniq,$(foreach t,$(ARTIFACTS),$(exp_$(t))) $(NOISE_EXPS)))
plan: | $(VENV_STAMP) ## every run of PROFILE (ARTIFACTS=...: of those targets): state, estimated time, GPU-hours and wall time still to spend
	@$(PY) -m run.sweep.plan --scale $(PROFILE) $(addprefix --exp ,$(PLAN_EXPS))

plan-brief: | $(VENV_STAMP)
	@$(PY) -m run.sweep.plan --scale $(PROFILE) --brief

# GPUs that the installed torch cannot use stop `make all` before any run, with one line.
check-cuda: | $(VENV_STAMP)
	@$(PY) -m run.node.probe --check-cuda

# The stamp's name is a checksum of what gets installed, so it needs no prerequisites: file times
# would send a fresh clone to reinstall the read-only environment of a container image.
$(VENV_STAMP):
	PYTHON=$(PYTHON) bash container/install-python.sh $(VENV)

venv: $(VENV_STAMP) ## create the virtual environment (pinned versions)

probe: | $(VENV_STAMP) ## print the hardware the experiments will use
	@$(PY) -m run.node.probe

matrix: | $(VENV_STAMP) ## validate the experiment matrix and list the runs of PROFILE
	@$(PY) -m run.sweep.matrix --check
	@$(PY) -m run.sweep.matrix --scale $(PROFILE)

# One sweep per experiment; its record is written only once every run is dealt with, so a killed
# make resumes here and the sweep repeats no finished run.
$(SWEEPS)/%.json: $(RUN_SRC) | $(VENV_STAMP)
	@$(PY) -m run.node.probe
	$(PY) -m run.sweep --scale $(PROFILE) --exp $*

# Reached only through pattern rules, files are "intermediate": make deletes them when it exits
# and, once deleted, never makes them again while what they feed is newer. The sweep records are
# named here (no recipe of their own: the pattern rule's), so a deleted record is made again.
# Precious: neither a record (what ran), a table nor a figure is deleted by make, even on an error
# or Ctrl-C (each is written whole, at its recipe's end).
$(foreach e,$(call uniq,$(foreach t,$(ARTIFACTS),$(exp_$(t)))),$(SWEEPS)/$(e).json):
.PRECIOUS: $(SWEEPS)/%.json $(TABLES)/%.csv $(FIGS)/%.png

NOISE_SWEEPS = $(foreach e,$(NOISE_EXPS),$(SWEEPS)/$(e).json)

.SECONDEXPANSION:
$(TABLES)/%.csv: $$(foreach e,$$(exp_$$*),$$(SWEEPS)/$$(e).json) $$(NOISE_SWEEPS) analysis/artifacts/$$(subst -,_,$$*).py $(ANALYSIS_SRC) | $(VENV_STAMP)
	$(PY) -m analysis $* --scale $(PROFILE)

$(FIGS)/%.png: $(TABLES)/%.csv analysis/artifacts/$$(subst -,_,$$*).py $(DRAW_SRC) | $(VENV_STAMP)
	$(PY) -m analysis $* --scale $(PROFILE) --figure

# No recipe: with its outputs and the report up to date there is nothing to do (`make -q` exits 0).
$(ARTIFACTS): %: $$(call outputs,%) $(REPORT_MD)
$(filter-out $(ARTIFACTS),$(ALL_TARGETS)):
	@echo "error: $@ is not implemented in this version of the artifact (its claims are listed as not measured)" >&2; exit 2

$(if $(THERE),$(THERE): ;)
$(REPORT_MD): $(MADE) $(THERE) $(REPORT_SRC) | $(VENV_STAMP)
	$(RENDER)

report: | $(VENV_STAMP) ## render report.md and .tex now, up to date or not: report/out/PROFILE, or RESULTS_DIR/PROFILE/report for another RESULTS_DIR (REPORT_RESULTS: several folders)
	$(RENDER)

# Debian: apt-get install texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended latexmk
pdf: $(REPORT_MD) ## build report.pdf beside the report from its LaTeX (needs latexmk and pdflatex)
	@command -v latexmk >/dev/null || { echo "error: latexmk not found: apt-get install latexmk texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended" >&2; exit 2; }
	cd $(REPORT_OUT) && latexmk -pdf -interaction=nonstopmode -halt-on-error -quiet report.tex >/dev/null
	@echo "wrote $(REPORT_OUT)/report.pdf"

# Two independent sweeps of the targets whose claims are timings, into separate results folders:
# every claim that neither calls inconclusive must get the same verdict (else a verdict was decided
# inside the noise). Measured: 48 min on 2 cores with other work beside it (two sweeps of 66 runs).
CHECK_TARGETS ?= table-noise fig-strategies fig-imagesize table-precision fig-datasets \
                 fig-templates fig-template-scaling fig-optimized
CHECK_DIR ?= results/check-verdicts
spread-sweeps: $(call spread,$(CHECK_TARGETS))
check-verdicts: | $(VENV_STAMP) ## two independent sweeps of the timing claims' targets; their decided verdicts must agree
	@for d in a b; do \
	  $(MAKE) --no-print-directory RESULTS_DIR=$(CHECK_DIR)/$$d spread-sweeps \
	    $(foreach t,$(CHECK_TARGETS),$(CHECK_DIR)/$$d/$(PROFILE)/tables/$(t).csv) || exit $$?; \
	done
	$(PY) -m analysis.check_verdicts $(CHECK_DIR)/a $(CHECK_DIR)/b --scale $(PROFILE)

self-check: | $(VENV_STAMP) ## judge every claim on the paper's own published numbers
	@$(PY) -m analysis self-check

bench-vision: | $(VENV_STAMP) ## images/s: real training loop vs synthetic in-memory tensors
	$(PY) -m run.bench.vision

bench-loaders: | $(VENV_STAMP) ## Scenario B images/s: DataLoader and DALI vs the synthetic in-memory ceiling
	$(PY) -m run.bench.loaders

bench-analysis: | $(VENV_STAMP) ## profile readers on 50 and 500 MB synthetic profiles, a 10 KB one end to end: MB/s, peak memory, verdicts (HTA_PYTHON, HTA_TRACE: beside HTA)
	$(PY) -m analysis.bench_analysis

bench-profiler: | $(VENV_STAMP) ## overhead of torch.profiler (and nsys if present) on the vision loop
	$(PY) -m run.bench.profiler

bench-optimize: | $(VENV_STAMP) ## faithful vs optimised (O1, O3): images/s, tokens/s, bytes copied per image
	$(PY) -m run.bench.optimize

# container/build.sh passes container/pins.env to the engine as --build-arg; TORCH_INDEX as here
export CONTAINER_ENGINE
container: ## build the OCI image mgpu-artifact with podman or docker (pins: container/pins.env)
	bash container/build.sh oci TORCH_INDEX=$(TORCH_INDEX)

container-test: ## the OCI image's self-test: make probe, the CPU unit tests and one torch.compile'd training step inside it
	bash container/build.sh test

sif: ## build the Apptainer image artifact.sif from apptainer.def (same pins, same set-up script)
	bash container/build.sh sif TORCH_INDEX=$(TORCH_INDEX)

# Where no registry and no download.pytorch.org can be reached (our dev machines): a Debian base
# made with debootstrap, the CPU torch wheel from LOCAL_WHEELS, the host's CA bundle for pip.
LOCAL_WHEELS ?= /opt/wheels
HOST_CA ?= /etc/ssl/certs/ca-certificates.crt
container-local: ## build and self-test the image here: podman --isolation chroot, debootstrap base, CPU torch
	ISOLATION=chroot BUILD_OPTS="--volume $(abspath $(LOCAL_WHEELS)):/wheels:ro --volume $(HOST_CA):/ca.crt:ro" \
	  bash container/build.sh oci BASE_IMAGE=$$(bash container/local-base.sh) WHEELS=/wheels CA_BUNDLE=/ca.crt
	ISOLATION=chroot bash container/build.sh test

# PROFILE goes to the job only when you set it: otherwise the compute node decides, not this one.
# ARTIFACTS on the command line: only those targets' runs and tables (the slurm test tier's few).
# SBATCH_OPTS (--partition, --account, ...) go to every sbatch call (run/slurm/submit.sh).
NODES ?= 1
slurm: ## submit to SLURM (in artifact.sif when it exists): NODES=n spreads the runs over n nodes, then the report (SBATCH_OPTS: site options)
	@NODES='$(NODES)' $(if $(filter command line environment,$(origin PROFILE)),PROFILE=$(PROFILE)) \
	  ARTIFACTS='$(if $(filter command line,$(origin ARTIFACTS)),$(ARTIFACTS))' bash run/slurm/submit.sh

# The slurm test tier starts a one-node cluster here (tests/slurm_cluster.py): it needs root and
# the Debian packages, which slurm-deps installs (nothing to do where they are, or without root).
slurm-deps: ## install slurm-wlm and munge for the slurm test tier (apt-get; root only, else nothing)
	@if command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null || \
	  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null; }; \
	else echo "slurm-deps: slurmctld absent and not root with apt-get: the slurm tier will skip"; fi

test-slurm: slurm-deps | $(VENV_STAMP) ## only the slurm tier: a real one-node SLURM cluster runs make slurm, an array, a requeue (root)
	$(PY) -m pytest -q -m slurm

data-mnist: | $(VENV_STAMP) ## download real MNIST into data/mnist (needs the network)
	$(PY) -c "from run.vision.tvcompat import import_torchvision as t; t().datasets.MNIST('data/mnist', download=True)"

# HF_TOKEN (or a token cached by `hf auth login`) of an account that accepted the Llama 3 licence;
# make hands command-line variables to the recipe's environment, so the token is never echoed.
# HF_ENDPOINT, LLAMA3_DIR, LLM_DATASETS_DIR and MNIST_DIR move where it fetches from and to.
assets: | $(VENV_STAMP) ## fetch what quick and paper need: MNIST, Llama3-8B-Instruct, the 4 data sets (HF_TOKEN=hf_...; resumable)
	$(PY) -m run.assets

lint: | $(VENV_STAMP) ## ruff lint and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: | $(VENV_STAMP) ## ruff format the code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Three pytest-xdist workers on our 2 cores: a one-rank run, a make call or a SLURM wait leaves a
# core idle that another worker's tests use (a fresh clone's make test alone: 2 workers at a46bee9
# 18:27, 75 % of the cores busy; 3 workers at fed3d01 16:44, 86 % in vmstat). tests/conftest.py
# keeps a module, and the modules that share a session's runs, on one worker. TEST_WORKERS=0: one
# process, in the collected order.
TEST_WORKERS ?= 3
test: lint | $(VENV_STAMP) ## run every test tier this machine can run (GPU tests skip without GPUs; TEST_WORKERS=3)
	$(PY) -m run.sweep.matrix --check
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-unit: | $(VENV_STAMP) ## only the fast CPU unit tests
	$(PY) -m pytest -q -m "not integration and not gpu"

# Part of `make test` (so of .ci/run) too: real sweeps of seconds-long runs killed, interrupted,
# stopped, fed a corrupt run, a full disk (tmpfs; root) or read-only results, and every bad setting.
test-faults: | $(VENV_STAMP) ## only the fault tier: each fault one line, nothing half-written, no process left, a rerun completes
	$(PY) -m pytest -q -m faults

test-gpu: | $(VENV_STAMP) ## only the GPU tier (needs CUDA GPUs)
	$(PY) -m pytest -q -m gpu

# With PY=python3 (a Python that already has torch) no venv is made: a GPU node may have another
# torch and no network. README "Checking a GPU node" lists what it needs beside torch.
gpu-check: | $(if $(filter command line environment,$(origin PY)),,$(VENV_STAMP)) ## every GPU code path at tiny scale, one line per check; results/gpu-check/bundle.tar.gz to attach to a report (PY=python3: no venv)
	$(PY) -m run.checks

# Wheels for a GPU node without network (Python 3.12 x86-64, as on the device machine): the
# packages gpu-check needs beside torch, torchvision, pandas, PyYAML and jinja2.
GPU_WHEELS := torchtune==0.6.1 torchao==0.15.0 torchdata==0.11.0 omegaconf==2.4.0 \
              datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
gpu-wheels: ## download the wheels gpu-check needs beside torch into .whl/ (for an offline node)
	$(PYTHON) -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
	  --platform any -d .whl $(GPU_WHEELS)

clean-results: ## delete results of PROFILE and its report (runs are lost)
	rm -rf $(RES) $(REPORT_OUT)

clean: ## delete caches and the report (keeps results and the venv)
	rm -rf report/out .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
