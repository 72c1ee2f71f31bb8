# Thin targets: each calls one script. The host environment (.venv/host) holds the orchestration and test tools;
# each framework gets its own environment (.venv/FAMILY) or image, built from docker/FAMILY/requirements*.txt.
PYTHON_VERSION ?= 3.11
HOST := .venv/host/bin/python
PROFILE ?= demo
FRAMEWORKS ?= pytorch tensorflow keras-tf jax mxnet-gluon chainer cntk keras2-theano caffe2 r-keras r-mxnet julia-knet
RUN ?= latest
TEST_WORKERS ?= 2                  # pytest-xdist workers: framework tests wait on imports and compiles much of the time

.PHONY: demo test test-fast venvs matrix data weights images setup report verify clean

$(HOST): scripts/requirements.txt
	python$(PYTHON_VERSION) -m venv .venv/host
	$(HOST) -m pip install --disable-pip-version-check -q -r scripts/requirements.txt
	touch $(HOST)

demo: $(HOST)                      ## the demo profile: every system on the CPU, synthetic data (PROFILE=demo-full: bf16 too)
	$(HOST) -m scripts.run --profile $(PROFILE)

venvs: $(HOST)                     ## the framework environments the tests use
	$(HOST) -m scripts.venvs $(FRAMEWORKS)

test: venvs                        ## the whole suite, slow integration tests included (what CI runs)
	$(HOST) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-fast: $(HOST)                 ## everything but the slow integration tests
	$(HOST) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

matrix: $(HOST)                    ## a profile through containers (default: full), then the merged report
	$(HOST) -m scripts.run --profile $(if $(filter demo,$(PROFILE)),full,$(PROFILE))

data: $(HOST)                      ## the real datasets and the ImageNet weights, downloaded and checked, into data/real
	$(HOST) -m shared.datasets --root data/real --real
	$(HOST) -m shared.weights --root data/real

weights: $(HOST)                   ## only the ImageNet weights (ResNet-50, DenseNet-121), in the canonical layout
	$(HOST) -m shared.weights --root data/real

images: $(HOST)                    ## the images a profile needs (PROFILE=full), or FRAMEWORK=… VARIANT=…
	$(HOST) -m scripts.images --profile $(if $(filter demo,$(PROFILE)),full,$(PROFILE)) $(if $(FRAMEWORK),--framework $(FRAMEWORK)) $(if $(VARIANT),--variant $(VARIANT))

setup: $(HOST)                     ## write .env: plain `docker compose` on GPU images where Docker can (DEVICE=cpu|gpu)
	$(HOST) -m scripts.setup $(if $(DEVICE),--$(DEVICE))

report: $(HOST)                    ## re-merge a run folder: make report RUN=results/demo-…  (default: the latest run)
	$(HOST) -m scripts.report $(if $(filter latest,$(RUN)),$$(ls -dt results/*-*/ | head -1),$(RUN))

verify: $(HOST)                    ## run the demo profile and compare with results/reference/cpu-2core (REFERENCE=…)
	$(HOST) -m scripts.verify $(if $(REFERENCE),--reference $(REFERENCE))

clean:                             ## environments and results (data stays)
	rm -rf .venv results/*-*
