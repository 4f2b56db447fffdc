# Lab targets (included by the root Makefile). The lab runs every host of
# inventories/$(TIER) as a systemd container under podman; see docs/lab.md.
LAB_INVENTORY = -i inventories/$(TIER) -i lab/overlay
LAB_CONNECT = -i .lab/$(TIER)/inventory.yml
HOST ?= compute01

.PHONY: lab lab-images lab-up lab-converge lab-down lab-shell lab-ha-soak bench-lab validate
lab-images: ## install podman/runc/debootstrap, containers.conf, build (or reuse) the lab images
	bash tools/lab/setup.sh

lab-up: setup lab-images ## start the containers of TIER (no converge)
	$(BIN)/ansible-playbook $(LAB_INVENTORY) lab/create.yml

lab-converge: setup ## converge site.yml on the running lab of TIER
	$(BIN)/ansible-playbook $(LAB_INVENTORY) $(LAB_CONNECT) site.yml

lab: lab-up lab-converge ## bring up TIER in containers and converge site.yml; they keep running
	@echo "lab $(TIER) is up: make lab-shell TIER=$(TIER) HOST=<host>; make lab-down TIER=$(TIER)"

lab-down: setup ## remove the containers and network of TIER
	$(BIN)/ansible-playbook $(LAB_INVENTORY) lab/destroy.yml

lab-shell: ## a root shell in HOST of the running lab TIER
	podman exec -it gpucluster-$(TIER)-$(HOST) bash -l

bench-lab: setup lab-images ## converge + idempotent re-run side by side: project ansible.cfg, + mitogen (if installed), stock (BENCH_ARGS=--rerun-only: re-runs on the running lab)
	$(BIN)/python tools/lab/bench_lab.py $(TIER) $(BENCH_ARGS)

validate: setup ## acceptance checks (nccl-tests, ib_write_bw, fio, dcgmi) on the running lab of TIER -> build/validate/<name>/
	$(BIN)/ansible-playbook $(LAB_INVENTORY) $(LAB_CONNECT) playbooks/validate.yml $(VALIDATE_ARGS)

# The controller failover, CYCLES times in a row, on the running lab of TIER (one with a backup
# controller: tier4): each cycle stops the primary's slurmctld with a GPU job waiting for the
# backup, runs a GPU and a CPU job on the backup as soon as it has taken control, starts the primary,
# runs them again, and checks that no node stays held and no idle node keeps GPUs
# (molecule/shared/tests/test_slurm_ha.py; verify runs one cycle). It prints how many of the
# waiting GPU jobs ran (the others failed in the window the takeover hook cannot close).
CYCLES ?= 10
lab-ha-soak: setup ## CYCLES controller failovers with a GPU job after each change of controller, on the running lab of TIER
	$(BIN)/ansible-playbook $(LAB_INVENTORY) lab/save-plan.yml
	GPUCLUSTER_HA_CYCLES=$(CYCLES) $(BIN)/pytest molecule/shared/tests/test_slurm_ha.py -p no:cacheprovider -q -rP \
	  --lab=.lab/$(TIER) -k takes_over --durations=1
