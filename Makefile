# Thin targets: each calls one script. The host environment (.venv/host) holds the orchestration and test tools;
# each framework gets its own environment (.venv/FAMILY) or image, built from docker/FAMILY/requirements*.txt.
PYTHON_VERSION ?= 3.11
HOST := .venv/host/bin/python
PROFILE ?= demo
FRAMEWORKS ?=                       # empty: one framework of each family in matrix.yaml, so every environment
RUN ?= latest
# demo, venvs and test install the Debian packages the systems need (docker/FAMILY/apt-packages.txt) as root or through
# `sudo -n`; NO_SYSTEM_PACKAGES=1 (here or in the environment) installs nothing and skips those systems' cells instead.
TEST_WORKERS ?= 2                  # pytest-xdist workers: framework tests wait on imports and compiles much of the time
PYTEST = $(HOST) -m pytest -n $(strip $(TEST_WORKERS)) --dist loadgroup
# Each tier prints its wall time; a tier's tests are chosen by their marker (docs/testing.md).
timed = t=$$(date +%s); $(1); rc=$$?; echo "[$(2)] $$(( $$(date +%s) - t )) s"; exit $$rc

.PHONY: help host demo test test-unit test-network lint bench-mutations venvs matrix data weights images setup report verify reference gpu-check gpu-wheels site \
        screenshots submit clean clean-runs
.DEFAULT_GOAL := help              # a bare `make` explains itself instead of building anything
# gpu-check runs in the GPU machine's own Python (PyTorch and JAX for CUDA installed there), not in a venv
GPU_PYTHON ?= python3

# A stamp, not the interpreter: .venv/host/bin/python is a link to the system's python, which `touch` would follow
# (and which a non-root user may not touch).
HOST_ENV := .venv/host/.requirements-installed
$(HOST_ENV): scripts/requirements.txt
	python$(PYTHON_VERSION) -m venv .venv/host
	$(HOST) -m pip install --disable-pip-version-check -q -r scripts/requirements.txt
	touch $@

help:                              ## this list (RUN=… means a run folder, or `latest`, wherever a target takes one)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):[^#]*## /\1\t/' | \
	  awk -F'\t' '{ printf "  make %-15s %s\n", $$1, $$2 }'

host: $(HOST_ENV)                  ## the host environment alone (orchestration and test tools)

demo: $(HOST_ENV)                  ## the demo profile: every system on the CPU, synthetic data (PROFILE=demo-full: bf16 too)
	$(HOST) -m scripts.run --profile $(PROFILE) $(foreach f,$(FRAMEWORK),--framework $(f))

venvs: $(HOST_ENV)                 ## the framework environments the tests use, every family in matrix.yaml (FRAMEWORKS=ids: those)
	$(HOST) -m scripts.launch.venvs --keep-going $(FRAMEWORKS)

test-unit: $(HOST_ENV)             ## the unit tier: no framework environment, Docker or network (about 2 minutes)
	@$(call timed,$(PYTEST) -m unit,test-unit)

# FW=ID (or FRAMEWORK=ID, as demo and images take it): the framework and integration tests of one framework (its probe, its cells), for a contributor on one runner
test: $(HOST_ENV)                  ## unit + framework + integration, no network (builds the environments first; FW=ID or FRAMEWORK=ID)
	@$(call timed,$(MAKE) --no-print-directory venvs $(if $(or $(FW),$(FRAMEWORK)),FRAMEWORKS=$(or $(FW),$(FRAMEWORK))) && \
	  $(HOST) -m scripts.launch.syspackages --tests,environments and test packages ready in)
	@$(call timed,$(PYTEST) -m "not network" $(if $(or $(FW),$(FRAMEWORK)),--framework $(or $(FW),$(FRAMEWORK))),test)

test-network: $(HOST_ENV)          ## what needs the package index: GPU wheel resolution, CUDA image builds (CI runs it)
	@$(call timed,$(PYTEST) -m network,test-network)

lint: $(HOST_ENV)                  ## ruff over the tree, mypy over what pyproject.toml names (the unit tier runs both)
	$(HOST) -m ruff check .
	$(HOST) -m ruff format --check .
	$(HOST) -m mypy

bench-mutations: $(HOST_ENV)       ## both mutation benches: does the suite notice a weakened check? (bench/README.md)
	$(HOST) bench/mutate_verdicts.py
	$(HOST) -m bench.mutate_safety

matrix: $(HOST_ENV)                ## a profile through containers (default: full), then the merged report
	$(HOST) -m scripts.run --profile $(if $(filter demo,$(PROFILE)),full,$(PROFILE)) $(if $(FRAMEWORK),--framework $(FRAMEWORK))

data: $(HOST_ENV)                  ## the real datasets and the ImageNet weights, downloaded and checked, into data/real
	$(HOST) -m shared.datasets --root data/real --real
	$(HOST) -m shared.weights --root data/real

weights: $(HOST_ENV)               ## only the ImageNet weights (ResNet-50, DenseNet-121), in the canonical layout
	$(HOST) -m shared.weights --root data/real

images: $(HOST_ENV)                ## the images a profile needs (PROFILE=full), or FRAMEWORK=… VARIANT=… (LEAN=1: no wheelhouse kept)
	$(HOST) -m scripts.launch.images --profile $(if $(filter demo,$(PROFILE)),full,$(PROFILE)) $(if $(FRAMEWORK),--framework $(FRAMEWORK)) $(if $(VARIANT),--variant $(VARIANT)) $(if $(LEAN),--lean)

# PULL=ghcr.io/OWNER/ pulls the published images of that choice instead (DIGESTS=images.json pins them, FRAMEWORK=…)
setup: $(HOST_ENV)                 ## write .env: plain `docker compose` on GPU images where Docker can (DEVICE=cpu|gpu)
	$(HOST) -m scripts.launch.setup $(if $(DEVICE),--$(DEVICE)) $(if $(PULL),--pull $(PULL)) \
	  $(if $(DIGESTS),--digests $(DIGESTS)) $(if $(FRAMEWORK),--framework $(FRAMEWORK))

report: $(HOST_ENV)                ## re-merge a run folder: make report RUN=results/demo-…  (default: the latest run)
	@runs=$$($(HOST) -m scripts.results.runs $(RUN)) && $(HOST) -m scripts.results.report $$runs

# verify runs the demo unless RUN is given on the command line (RUN=latest: the newest run folder, not a new run)
verify: $(HOST_ENV)                ## run the demo and compare with this machine class's reference; RUN=… checks a run
	@$(if $(filter command line,$(origin RUN)),run=$$($(HOST) -m scripts.results.runs $(RUN)) && ,)$(HOST) -m scripts.results.verify \
	  $(if $(filter command line,$(origin RUN)),--run $$run) $(if $(REFERENCE),--reference $(REFERENCE))

reference: $(HOST_ENV)             ## run the reference profile and write results/reference/MACHINE-CLASS for verify (FRAMEWORK="ID …": fold new systems in; ADD=1: a further run)
	$(HOST) -m scripts.results.reference $(if $(ADD),--add) $(foreach f,$(FRAMEWORK),--framework $(f))

site: $(HOST_ENV)                  ## the static site in site/: runners side by side, the references (RUN=… adds runs)
	@$(if $(filter command line,$(origin RUN)),runs=$$($(HOST) -m scripts.results.runs $(RUN)) && ,)$(HOST) -m scripts.results.site \
	  $(if $(filter command line,$(origin RUN)),$$runs) $(RUNS)

screenshots: $(HOST_ENV)           ## the site's first screen at 1440 and 390 px into docs/images (chromium, chromedriver)
	$(HOST) -m scripts.results.screenshots

submit: $(HOST_ENV)                ## a run folder as a community submission: make submit RUN=… [NAME=…] [NO_HOSTS=1] [SIGN=KEY]
	@run=$$($(HOST) -m scripts.results.runs $(RUN)) && $(HOST) -m scripts.results.submission submit $$run \
	  $(if $(NAME),--name $(NAME)) $(if $(NO_HOSTS),--no-hosts) $(if $(SIGN),--sign $(SIGN))

gpu-check:                         ## a bare GPU machine, no Docker, network or venvs: two parts of 6 minutes (PART=1|2)
	$(GPU_PYTHON) -m scripts.gpu_check --python $$(command -v $(GPU_PYTHON)) $(if $(PART),--part $(PART))

gpu-wheels: $(HOST_ENV)            ## Keras 3's wheels, Chainer's source for gpu-check's Python 3.12 (network)
	$(HOST) -m pip download --quiet --no-deps --only-binary :all: --python-version 3.12 --implementation cp \
	  --platform manylinux2014_x86_64 --require-hashes -r docker/gpu-check/requirements.txt -d .wheelhouse/gpu-check
	PIP_CONSTRAINT=docker/gpu-check/build-constraints.txt $(HOST) -m pip download --quiet --no-deps \
	  --no-binary :all: --require-hashes -r docker/gpu-check/sources.txt -d .wheelhouse/gpu-check

clean:                             ## environments, site/, wheelhouses, caches; keeps data/ and every run (clean-runs)
	@echo "removing: .venv/ (environments) site/ .wheelhouse/ build/ and Python caches; keeping data/ and results/"
	rm -rf .venv site .wheelhouse build .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +

clean-runs:                        ## every run folder under results/ (the references and submissions stay)
	@runs="$$(ls -d results/*-*/ 2>/dev/null)"; if [ -z "$$runs" ]; then echo "no run folders under results/"; \
	  else echo "removing $$(echo $$runs | wc -w) run folder(s):" $$runs; rm -rf $$runs; fi
