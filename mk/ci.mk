# CI, execution environment, collection and docs targets (included by the root Makefile).
# Uses BIN, TIER, INVENTORY and the setup target from it. See docs/guide.md, tools/ci/runner/README.md.
PLAYBOOK ?= plan
LAB ?=
RUNNER_DIR ?= build/runner/$(TIER)
RUNNER_STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
RUNNER_IDENT ?= $(PLAYBOOK)-$(RUNNER_STAMP)
RUNNER_ARGS ?=
SLICES ?=
PLAN_FILE ?=
EXPECT_UNCHANGED ?=
# RUNNER_IMAGE=<image>: run inside that execution environment (make ee builds EE_TAG) with
# ansible-runner's container mode; RUNNER_ENGINE is podman or docker
RUNNER_IMAGE ?=
RUNNER_ENGINE ?= podman
COLLECTION_VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
COLLECTION_TARBALL := build/dist/gpucluster-tiers-$(COLLECTION_VERSION).tar.gz
ANSIBLE_BUILDER ?= $(BIN)/ansible-builder
EE_TAG ?= gpucluster-tiers-ee:$(COLLECTION_VERSION)

.PHONY: runner collection ee-context ee docs ci-pipeline
# ansible-runner writes its process's environment into artifacts/<ident>/command: it gets the
# caller's environment filtered (tools/ci/runner_dir.py runner_env: PATH, HOME, LANG, LC_*,
# ANSIBLE_* ...; RUNNER_ENV_KEEP="NAME ..." passes more), so no CI secret lands in build/runner.
runner: setup ## playbooks/PLAYBOOK.yml (plan|site|validate) for TIER through ansible-runner; LAB=1 for the lab; SLICES=N: site as N parallel compute slices
ifdef SLICES
	$(BIN)/python tools/ci/run_slices.py --inventory $(INVENTORY) --dest $(RUNNER_DIR) --playbook $(PLAYBOOK) \
	  --slices $(SLICES) --ident $(RUNNER_IDENT) $(if $(LAB),--lab $(TIER)) $(if $(PLAN_FILE),--plan-file $(PLAN_FILE)) \
	  $(if $(EXPECT_UNCHANGED),--expect-unchanged) $(if $(RUNNER_ARGS),--runner-args '$(RUNNER_ARGS)')
else
	$(BIN)/python tools/ci/runner_dir.py prepare --inventory $(INVENTORY) --dest $(RUNNER_DIR) $(if $(LAB),--lab $(TIER)) \
	  $(if $(RUNNER_IMAGE),--container)
	$(BIN)/python tools/ci/runner_dir.py exec -- \
	  $(BIN)/ansible-runner run $(RUNNER_DIR) -p playbooks/$(PLAYBOOK).yml --ident $(RUNNER_IDENT) \
	  $(if $(RUNNER_IMAGE),--container-image $(RUNNER_IMAGE) --process-isolation --process-isolation-executable $(RUNNER_ENGINE)) \
	  $(RUNNER_ARGS); \
	  rc=$$?; echo "artifacts: $(RUNNER_DIR)/artifacts/$(RUNNER_IDENT) (status $$(cat $(RUNNER_DIR)/artifacts/$(RUNNER_IDENT)/status 2>/dev/null), rc $$rc)"; exit $$rc
endif

collection: setup ## build the collection tarball into build/dist/ (galaxy.yml build_ignore keeps it small)
	mkdir -p build/dist
	$(BIN)/ansible-galaxy collection build --force --output-path build/dist .

ee-context: collection ## write the execution environment's build context to build/ee (ansible-builder create)
	$(ANSIBLE_BUILDER) create --file execution-environment.yml --context build/ee

ee: collection ## build the execution environment image EE_TAG (ansible-builder build; needs podman or docker)
	$(ANSIBLE_BUILDER) build --file execution-environment.yml --context build/ee --tag $(EE_TAG) \
	  $(if $(EE_BASE_IMAGE),--build-arg EE_BASE_IMAGE=$(EE_BASE_IMAGE))

docs: setup ## regenerate docs/settings.md from the engine (tests/unit/repo/test_docs.py keeps it current)
	$(BIN)/python tools/docs/gen_settings.py --output docs/settings.md

ci-pipeline: ## the example CI pipeline: plan, lab converge (twice), validate, artifacts (tools/ci/pipeline.sh)
	TIER=$(TIER) bash tools/ci/pipeline.sh

# make compat: the older ansible-core release lines meta/runtime.yml claims (requires_ansible), one venv
# each under COMPAT_DIR, built from tests/compat/ansible-core-<line>.txt (every package pinned, PyPI;
# rebuilt when that file changes): the unit tests that drive Ansible's APIs and the plan of every
# reference inventory, checked against the engine and the golden host files (tools/ci/compat.py).
# The toolchain's own line (2.19) is make unit's. ~2 min a line on 2 cores; README "Supported ansible-core".
COMPAT_DIR ?= .cache/compat
COMPAT_LINES ?= $(patsubst tests/compat/ansible-core-%.txt,%,$(wildcard tests/compat/ansible-core-*.txt))
.PHONY: compat compat-venvs
$(COMPAT_DIR)/%/.stamp: tests/compat/ansible-core-%.txt
	rm -rf $(COMPAT_DIR)/$*
	$(PYTHON) -m venv $(COMPAT_DIR)/$*
	$(COMPAT_DIR)/$*/bin/pip install --quiet --disable-pip-version-check --no-deps -r $<
	touch $@

compat-venvs: $(foreach line,$(COMPAT_LINES),$(COMPAT_DIR)/$(line)/.stamp) ## the venvs of the older ansible-core lines (tests/compat/ansible-core-*.txt)

compat: setup compat-venvs ## unit tests of the plugins and every reference plan on each older ansible-core line (tools/ci/compat.py)
	$(BIN)/python tools/ci/compat.py --venvs $(COMPAT_DIR) $(COMPAT_LINES)

# A release: set galaxy.yml's version (and ee-requirements.yml's tarball name), add a fragment with the
# release_summary, then `make release`: the fragments in changelogs/fragments/ become that version's entry
# in changelogs/changelog.yaml and are removed, CHANGELOG.rst is written; commit both, then make collection.
.PHONY: release
release: setup ## release galaxy.yml's version in the changelog (antsibull-changelog release: changelog.yaml, CHANGELOG.rst)
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog release
	$(BIN)/antsibull-changelog lint
