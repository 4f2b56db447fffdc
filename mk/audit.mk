# The audit (included by the root Makefile): the running cluster against its plan, read-only
# (playbooks/audit.yml, docs/audit.md). AUDIT_ARGS passes -e settings, e.g.
#   make audit INVENTORY=inventories/site AUDIT_ARGS="-e audit_fail_on=critical"
# On the container lab: make lab-audit TIER=tier1 (the lab's overlay and connection).
.PHONY: audit lab-audit
audit: setup ## read every host against the plan -> build/audit/<name>/audit.{json,md,html}; fails on findings (INVENTORY=path)
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/audit.yml $(AUDIT_ARGS)

lab-audit: setup ## the audit on the running lab of TIER (its overlay and connection)
	$(BIN)/ansible-playbook $(LAB_INVENTORY) $(LAB_CONNECT) playbooks/audit.yml $(AUDIT_ARGS)

.PHONY: bench-audit
AUDIT_BENCH_SIZES ?= 64,256,1024,4096
# AUDIT_BENCH_PLAYBOOK=1024: also ansible-playbook's side on that generated inventory (no host contacted; minutes)
AUDIT_BENCH_PLAYBOOK ?=
bench-audit: setup ## the audit's controller side (requests, classification) on generated clusters of 64..4096 nodes
	$(BIN)/python tools/bench/bench_audit.py --sizes $(AUDIT_BENCH_SIZES) --playbook "$(AUDIT_BENCH_PLAYBOOK)"

# A node's self-healing history (playbooks/history.yml, docs/runbook.md "Self-healing"), read on the
# first head: make history NODE=compute03 TIER=tier4 (the running lab of TIER when it is up) or
# INVENTORY=inventories/site.
.PHONY: history
HISTORY_INVENTORY = $(if $(and $(filter file,$(origin INVENTORY)),$(wildcard .lab/$(TIER)/inventory.yml)),$(LAB_INVENTORY) $(LAB_CONNECT),-i $(INVENTORY))
history: setup ## print a node's self-healing history lines from the head (NODE=compute03; TIER= or INVENTORY=)
	@test -n "$(NODE)" || { echo "make history: name the node, e.g. make history NODE=compute03 TIER=tier4" >&2; exit 2; }
	$(BIN)/ansible-playbook $(HISTORY_INVENTORY) playbooks/history.yml -e history_node=$(NODE)
