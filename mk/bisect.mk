# Bisection (included by the root Makefile): the one slow node or cable behind a slow multi-node
# all_reduce (playbooks/bisect.yml, docs/runbook.md "Find the slow node"). NODES is a Slurm hostlist,
# JOB a job id (its nodes from sacct); BISECT_ARGS passes -e settings, e.g. "-e bisect_timeout_s=600".
#   make bisect INVENTORY=inventories/site NODES='compute[01-08]'
#   make lab-bisect TIER=tier4 NODES='compute[01-08]'    (the running lab: its overlay and connection)
.PHONY: bisect lab-bisect
_BISECT_SET = $(if $(JOB),-e bisect_job=$(JOB),-e 'bisect_nodes=$(NODES)')
bisect: setup ## find the slow node and its cable among NODES='compute[01-08]' (or JOB=<id>) -> build/bisect/<name>/report.{json,md}
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/bisect.yml $(_BISECT_SET) $(BISECT_ARGS)

lab-bisect: setup ## the bisection on the running lab of TIER (its overlay and connection)
	$(BIN)/ansible-playbook $(LAB_INVENTORY) $(LAB_CONNECT) playbooks/bisect.yml $(_BISECT_SET) $(BISECT_ARGS)
