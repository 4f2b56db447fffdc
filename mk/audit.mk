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
