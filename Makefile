# Reproduction artifact: profiling and optimising multi-GPU ML jobs.
# `make` lists the targets. `make all` runs every experiment and builds the report; `make test`
# runs the tests. Both create the virtual environment they need (pins: requirements.txt).

.DEFAULT_GOAL := help
SHELL := /bin/bash
.DELETE_ON_ERROR:

# Paper scale on a GPU node, CPU smoke scale elsewhere. Override: make all PROFILE=quick
PROFILE ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo paper || echo smoke)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
RES := results/$(PROFILE)
TABLES := $(RES)/tables
SWEEPS := $(RES)/sweeps
FIGS := report/out/figures
export PYTHONPATH := $(CURDIR)
export PYTHONUNBUFFERED := 1

# Sources whose change may change a run: a sweep re-checks its runs (finished ones are kept).
RUN_SRC := experiments/matrix.yaml $(wildcard run/*.py)

# target -> experiment, for every artifact this version implements.
VISION_FIGS := fig-strategies fig-imagesize fig-loss
VISION_TABLES := table-precision table-pinmem
exp_fig-strategies := V1
exp_fig-imagesize := V2
exp_table-precision := V3
exp_table-pinmem := V4
exp_fig-loss := V7

ARTIFACTS := $(VISION_FIGS) $(VISION_TABLES)
FIG_FILES := $(VISION_FIGS:%=$(FIGS)/%.png)
TABLE_FILES := $(ARTIFACTS:%=$(TABLES)/%.csv)

-include mk/*.mk

.PHONY: help all report test test-unit lint format probe venv clean clean-results bench-vision \
        data-mnist matrix $(ARTIFACTS)

help: ## show this help
	@echo "Usage: make <target> [PROFILE=smoke|quick|paper] [PROFILER=none|auto|torch|nsys]"
	@echo "PROFILE now: $(PROFILE)"
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk 'BEGIN {FS = ":.*## "}; {printf "  %-24s %s\n", $$1, $$2}'

all: $(TABLE_FILES) $(FIG_FILES) ## run every experiment, build every table, figure and the report
	@$(MAKE) --no-print-directory report

$(VENV_STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(VENV_STAMP) ## create the virtual environment (pinned versions)

probe: | $(VENV_STAMP) ## print the hardware the experiments will use
	@$(PY) -m run.probe

matrix: | $(VENV_STAMP) ## validate the experiment matrix and list the runs of PROFILE
	@$(PY) -m run.matrix --check
	@$(PY) -m run.matrix --profile $(PROFILE)

# One sweep per experiment; its record is written only once every run is dealt with, so a killed
# make resumes here and the sweep repeats no finished run.
$(SWEEPS)/%.json: $(RUN_SRC) | $(VENV_STAMP)
	@$(PY) -m run.probe
	$(PY) -m run.sweep --profile $(PROFILE) --exp $*

.SECONDEXPANSION:
$(TABLES)/%.csv: $$(SWEEPS)/$$(exp_$$*).json analysis/$$(subst -,_,$$*).py analysis/common.py | $(VENV_STAMP)
	$(PY) -m analysis.$(subst -,_,$*) --profile $(PROFILE)

$(FIGS)/%.png: $(TABLES)/%.csv report/figures/$$(subst -,_,$$*).py | $(VENV_STAMP)
	$(PY) -m report.figures.$(subst -,_,$*) --profile $(PROFILE)

fig-strategies: ## V1  time and speed-up of DDP, DDP-RR, DDP-DS by GPU count (C Fig.1)
fig-imagesize: ## V2  time and efficiency by image size and GPU count (C Fig.2, J Fig.2)
table-precision: ## V3  FP64/FP32/FP16 time, accuracy, efficiency (Table 2)
table-pinmem: ## V4  pin_memory off/on time, accuracy, efficiency (Table 3)
fig-loss: ## V7  training loss per epoch by precision and pin_memory (J Fig.5)
$(VISION_FIGS): %: $(TABLES)/%.csv $(FIGS)/%.png
	@$(MAKE) --no-print-directory report
$(VISION_TABLES): %: $(TABLES)/%.csv
	@$(MAKE) --no-print-directory report

report: | $(VENV_STAMP) ## render report/out/report.md and .tex from the results tables
	$(PY) -m report.build --profile $(PROFILE)

bench-vision: | $(VENV_STAMP) ## images/s: real training loop vs synthetic in-memory tensors
	$(PY) -m run.bench_vision

data-mnist: | $(VENV_STAMP) ## download real MNIST into data/mnist (needs the network)
	$(PY) -c "from run.tvcompat import import_torchvision as t; t().datasets.MNIST('data/mnist', download=True)"

lint: | $(VENV_STAMP) ## ruff lint and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: | $(VENV_STAMP) ## ruff format the code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: lint | $(VENV_STAMP) ## run every test tier that this machine can run
	$(PY) -m run.matrix --check
	$(PY) -m pytest -q

clean-results: ## delete results of PROFILE and the report (runs are lost)
	rm -rf $(RES) report/out

clean: ## delete caches and the report (keeps results and the venv)
	rm -rf report/out .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
