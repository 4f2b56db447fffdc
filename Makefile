# gpucluster.tiers — make help
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TIER ?= tier3
INVENTORY ?= inventories/$(TIER)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: typecheck help setup setup-collections deps plan test lint sanity unit golden integration molecule bench-plan bench-site clean
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

setup: $(VENV)/.stamp setup-collections ## make .venv with the pinned toolchain (pyproject.toml) and the declared collections
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PYTHON) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > $(VENV)/requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -r $(VENV)/requirements.txt
	@# an older toolchain installed the whole `ansible` bundle; its collections would hide a missing declaration
	if $(BIN)/pip show --quiet ansible >/dev/null 2>&1; then $(BIN)/pip uninstall --quiet --yes ansible; fi
	touch $@

# galaxy.yml's dependencies into .collections/runtime, the lab's (lab/requirements.yml) into
# .collections/lab: ansible.cfg searches only these (and the in-place link collections/). Copied
# from the wheel of the pinned `ansible` release, downloaded once into COLLECTIONS_CACHE (PyPI,
# not Galaxy); a second run only reads their MANIFEST.json files.
COLLECTIONS_CACHE ?= .cache/ansible-release
setup-collections: $(VENV)/.stamp ## install exactly the declared collections into .collections/ (tools/setup/install_collections.py)
	$(BIN)/python tools/setup/install_collections.py galaxy.yml --dest .collections/runtime --cache $(COLLECTIONS_CACHE)
	$(BIN)/python tools/setup/install_collections.py lab/requirements.yml --dest .collections/lab --also galaxy.yml \
	  --cache $(COLLECTIONS_CACHE)

deps: ## install the Debian packages the suite needs (tests/host-packages.txt; root, skipped when present)
	bash tools/setup/host_deps.sh tests/host-packages.txt

plan: setup ## write build/plan/<name>/ (plan.json, report.md, hosts/) for TIER=tierN or INVENTORY=path
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/plan.yml

.PHONY: tco
tco: setup ## fabric cost, InfiniBand vs RoCEv2 over 3 years, for TIER=tierN or INVENTORY=path (no host contact)
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/tco.yml

# the CRDs' schemas (Kueue, KubeRay, GPU and Network Operator, MPI and PyTorch jobs) come from the
# repository's catalog tools/k8s/crd_schemas/ (tools/k8s/extract_crd_schemas.py; K8S_CRDS= or
# GPUCLUSTER_K8S_CRDS point to another); built-in kinds from kubernetes-validate
.PHONY: k8s-validate
k8s-validate: plan ## schema-check build/plan/<name>/kubernetes/ of a Kubernetes INVENTORY (tools/k8s/validate_manifests.py)
	$(BIN)/python tools/k8s/validate_manifests.py --inventory $(INVENTORY) --quiet $(if $(K8S_CRDS),--crds $(K8S_CRDS))

lint: setup typecheck ## mypy (typecheck), ruff, dead code (vulture), ansible-lint (production profile), antsibull-changelog lint, ansible-test sanity
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# dead code in plugins/ and tools/: vulture, the names used by name in tools/lint/vulture_whitelist.py
	$(BIN)/python tools/lint/dead_code.py
	# ansible-lint's syntax check needs an inventory, and ansible.cfg names none: the reference tier3
	ANSIBLE_INVENTORY=$(CURDIR)/inventories/tier3 $(BIN)/ansible-lint --profile production
	$(BIN)/antsibull-changelog lint
	$(BIN)/python tools/sanity/run.py $(SANITY_ARGS)

# ansible-test must run from a folder named ansible_collections/gpucluster/tiers (the in-place
# link resolves to the repository); tools/sanity/run.py builds the collection, unpacks it into
# such a temporary folder with tests/config.yml and tests/sanity/, and runs the sanity tests for
# Python 3.11 (the controller's; tests/config.yml: modules need >= 3.10). The first run takes
# ~5 min (a venv per test, cached in ~/.ansible/test), later ones ~2 min.
# mypy over the collection's plugins (as the package ansible_collections.gpucluster.tiers, through the
# collections/ link) and the tools; profile in pyproject.toml [tool.mypy]
typecheck: setup ## mypy: plugins/ and tools/, no implicit Any
	$(BIN)/mypy -p ansible_collections.gpucluster.tiers.plugins
	$(BIN)/mypy tools

sanity: setup ## ansible-test sanity on the built collection (tools/sanity/run.py; SANITY_ARGS=--test pylint ...)
	$(BIN)/python tools/sanity/run.py $(SANITY_ARGS)

# UNIT_WORKERS: pytest-xdist workers (auto: one per core; 0: one process, as `pytest` alone runs)
UNIT_WORKERS ?= auto
unit: setup ## pytest: engine, filters, modules, parsers (UNIT_WORKERS=auto processes)
	$(BIN)/pytest -n $(UNIT_WORKERS) --dist loadgroup

golden: setup ## rewrite tests/unit/repo/golden/host-files.txt (every host file make plan renders); review its diff
	GPUCLUSTER_UPDATE_GOLDEN=1 $(BIN)/pytest tests/unit/repo/test_plan_playbook.py -k golden_list

integration: setup ## the built tarball installed elsewhere: dependencies, plan playbook by FQCN (tests/integration)
	$(BIN)/pytest tests/integration

TIERS ?= tier1 tier2 tier3 tier4 tier4-k8s
molecule: setup lab-images ## molecule scenarios (create, converge, idempotence, verify, destroy) for TIERS
	$(BIN)/python tools/lab/molecule_suite.py $(TIERS)

test: deps lint unit integration compat molecule ## the whole suite (CI runs this)

# the checks a change needs before it is pushed: no root, no containers, a few minutes
# (lint ~2 min with ansible-test sanity, ~5 min its first time; unit ~5 min; integration ~15 s)
.PHONY: check
check: lint unit integration ## the quick checks (no root, no lab, minutes): lint, unit, integration

bench-plan: setup ## plan generated clusters of 64..16384 nodes: time and peak memory
	$(BIN)/python tools/bench/bench_plan.py

BENCH_SIZES ?= 64,256,1024,4096,16384
BENCH_BEFORE ?= 64,256
bench-site: setup ## site.yml's controller stage (plan, per-host views) on generated inventories: time, RSS, bytes per host
	$(BIN)/python tools/bench/bench_site.py --sizes $(BENCH_SIZES) --before "$(BENCH_BEFORE)"

clean: ## remove build output
	rm -rf build

# more targets, one folder: mk/lab.mk (the container lab), mk/ci.mk (runner, collection, EE, docs),
# mk/audit.mk (the running cluster against its plan), mk/bisect.mk (the slow node behind a slow all_reduce)
include mk/lab.mk mk/ci.mk mk/audit.mk mk/bisect.mk
