# gpucluster.tiers — make help
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TIER ?= tier3
INVENTORY ?= inventories/$(TIER)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help setup deps plan test lint unit molecule bench-plan bench-site clean
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

setup: $(VENV)/.stamp ## make .venv with the pinned toolchain (pyproject.toml)
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PYTHON) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > $(VENV)/requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -r $(VENV)/requirements.txt
	touch $@

deps: ## install the Debian packages the suite needs (tests/host-packages.txt; root, skipped when present)
	bash lab/host_deps.sh tests/host-packages.txt

plan: setup ## write build/plan/<name>/ (plan.json, report.md, hosts/) for TIER=tierN or INVENTORY=path
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/plan.yml

lint: setup ## ruff and ansible-lint (production profile)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint --profile production

unit: setup ## pytest: engine, filters, modules, parsers
	$(BIN)/pytest

TIERS ?= tier1 tier2 tier3 tier4
molecule: setup lab-images ## molecule scenarios (create, converge, idempotence, verify, destroy) for TIERS
	$(BIN)/python lab/molecule_suite.py $(TIERS)

test: deps lint unit molecule ## the whole suite (CI runs this)

bench-plan: setup ## plan generated clusters of 64..4096 nodes: time and peak memory
	$(BIN)/python tests/bench/bench_plan.py

BENCH_SIZES ?= 64,256,1024,4096
BENCH_BEFORE ?= 64,256
bench-site: setup ## site.yml's controller stage (plan, per-host views) on generated inventories: time, RSS, bytes per host
	$(BIN)/python tests/bench/bench_site.py --sizes $(BENCH_SIZES) --before "$(BENCH_BEFORE)"

clean: ## remove build output
	rm -rf build

-include lab/lab.mk
-include mk/ci.mk
