"""The MIG example's Slurm configuration starts slurmd in the lab (tier2, the example's base tier).

inventories/examples/tier2-mig partitions compute01's GPUs into 3g.40gb + 2g.20gb + 2 x 1g.10gb and four of
compute02's into seven 1g.10gb. Its plan is computed here; on the lab's compute node of the same name:

- the product's program (roles/slurm/files/gpucluster-mig-gres) writes the node's gres.conf lines from the
  plan's part (the example's /etc/slurm/gres-mig.json) and the driver's MIG listing;
- slurmd (Debian 12's 22.05.8) with the example's node line (Gres=gpu:<profile>:<n>) and gres.conf
  (``Include`` of those lines) prints the GRES it parsed (``slurmd -G``), starts, and registers with a
  slurmctld of its own, which lists the node idle with the example's GRES (not drained for a count that
  differs from slurm.conf).

What the lab cannot have, and this test stands in for (here only, never in the product): no GPU, so no
driver: the ``nvidia-smi mig -lci`` listing, /proc/driver/nvidia-caps/mig-minors and ``nvidia-smi -q``
minor numbers are written by this test (the MIG User Guide's formats, instance IDs chosen here, as in
tests/unit/plugins/plugin_utils/slurm/test_gres_mig.py), and slurmd stats every file a GRES names as a
character device: /dev/nvidia0-7 are the lab's /dev/null placeholders (lab/create.yml) and this test
links each /dev/nvidia-caps/nvidia-capN it needs to /dev/null, then removes them. The slurmd and
slurmctld started here use their own ports, folders and minimal configuration (no accounting: the lab's
slurmdbd never sees them) and are stopped by their PID files. CUDA_VISIBLE_DEVICES inside a job and the
cgroup device confinement need a real MIG GPU and are not checked here.
"""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "inventories" / "examples" / "tier2-mig"
WORK = "/tmp/gpucluster-mig-slurmd"
CAPS = "/dev/nvidia-caps"


def _example_plan() -> dict[str, Any]:
    if str(ROOT / "collections") not in sys.path:
        sys.path.insert(0, str(ROOT / "collections"))
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.reading import read_inventory, role_files
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.plan import assembly

    site, groups = read_inventory(EXAMPLE)
    return assembly.cluster_plan(site, groups, role_files(ROOT))


def _template(name: str, **context: Any) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT / "roles" / "slurm" / "templates")))
    env.filters["to_nice_json"] = lambda value, sort_keys=True: json.dumps(value, indent=4, sort_keys=sort_keys)
    return env.get_template(name).render(**context)


def _driver_stand_in(gpus: dict[str, dict[str, int]], count: int) -> tuple[str, str, str]:
    """(nvidia-smi mig -lci, mig-minors, nvidia-smi -q) for the planned devices: a stand-in (see above)."""
    rows, gi_of = [], {}
    for index, profiles in sorted(gpus.items(), key=lambda kv: int(kv[0])):
        gi = 1
        for profile, n in sorted(profiles.items()):
            for _k in range(n):
                rows.append(f"|   {index}      {gi}       MIG {profile:<12}     0         0          0:1     |")
                gi_of[(int(index), gi)] = profile
                gi += 1
    lci = "\n".join(["| Compute instances:                                                 |", *rows]) + "\n"
    minors = ["config 1", "monitor 2"]
    for g in range(count):
        for gi in range(15):
            base = 3 + g * 135 + gi * 9
            minors += [
                f"gpu{g}/gi{gi}/access {base}",
                *(f"gpu{g}/gi{gi}/ci{c}/access {base + 1 + c}" for c in range(8)),
            ]
    query = "".join(f"    Minor Number                          : {i}\n" for i in range(count))
    return lci, "\n".join(minors) + "\n", query


def _put(host: Any, path: str, text: str) -> None:
    data = base64.b64encode(text.encode()).decode()
    host.check_output(f"echo {data} | base64 -d > {path}")


def _node_line(n: dict[str, Any]) -> str:
    """The example's NodeName line, field for field as roles/slurm/templates/slurm.conf.j2 writes it."""
    return (
        f"NodeName={n['nodes']} CPUs={n['cpus']} Boards={n['boards']} SocketsPerBoard={n['sockets_per_board']} "
        f"CoresPerSocket={n['cores_per_socket']} ThreadsPerCore={n['threads_per_core']} RealMemory={n['real_memory']} "
        f"Gres={n['gres']} Features={','.join(n['features'])} State={n['state']}"
    )


@pytest.fixture(scope="module")
def example(plan: dict[str, Any]) -> dict[str, Any]:
    if plan["cluster"]["name"] != "tier2":
        pytest.skip("the MIG example is a tier2 site: checked in the tier2 lab")
    return _example_plan()


@pytest.mark.parametrize("node", ["compute01", "compute02"])
def test_the_mig_examples_config_starts_slurmd(
    hosts: dict[str, Any], plan: dict[str, Any], example: dict[str, Any], node: str
) -> None:
    assert node in example["slurm"]["gres_mig"]["hosts"] and node in plan["hosts"], node
    host = hosts[node]
    count = example["cluster"]["gpus_per_node"]
    assert plan["cluster"]["gpus_per_node"] == count  # the lab's /dev/nvidia0-7 placeholders
    line = next(n for n in example["slurm"]["nodes"] if n["nodes"] == node)
    part = _template("gres-mig.json.j2", gpucluster_host_plan=example, inventory_hostname=node)
    gres_conf = _template("gres.conf.j2", gpucluster_host_plan=example)
    assert f"Include {example['slurm']['gres_mig']['conf']}" in gres_conf.splitlines()
    lci, minors, query = _driver_stand_in(json.loads(part)["gpus"], count)
    slurm_conf = "\n".join(
        [
            "ClusterName=gpucluster-mig-check",
            f"SlurmctldHost={node}(127.0.0.1)",
            "SlurmctldPort=6827",
            "SlurmdPort=6828",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"StateSaveLocation={WORK}/state",
            f"SlurmdSpoolDir={WORK}/spool",
            f"SlurmctldPidFile={WORK}/slurmctld.pid",
            f"SlurmdPidFile={WORK}/slurmd.pid",
            f"SlurmctldLogFile={WORK}/slurmctld.log",
            f"SlurmdLogFile={WORK}/slurmd.log",
            "GresTypes=gpu",
            f"SelectType={example['slurm']['select_type']}",
            "SelectTypeParameters=CR_Core_Memory",
            "ProctrackType=proctrack/linuxproc",  # the lab's (lab/overlay: no cgroup namespace)
            "TaskPlugin=task/affinity",
            "SlurmdParameters=config_overrides",  # a container is not the example's 224-CPU node (lab overlay)
            _node_line(line),
            f"PartitionName=gpu Nodes={node} Default=YES State=UP",
        ]
    )
    program = (ROOT / "roles" / "slurm" / "files" / "gpucluster-mig-gres").read_text()
    assert not host.file(CAPS).exists, f"{node} already has {CAPS}: not a lab node"
    env = f"SLURM_CONF={WORK}/slurm.conf"
    try:
        host.check_output(f"rm -rf {WORK} && mkdir -p {WORK}/state {WORK}/spool {WORK}/driver")
        for path, text in [
            (f"{WORK}/gpucluster-mig-gres", program),
            (f"{WORK}/gres-mig.json", part),
            (f"{WORK}/driver/lci", lci),
            (f"{WORK}/driver/mig-minors", minors),
            (f"{WORK}/driver/q", query),
            (f"{WORK}/slurm.conf", slurm_conf + "\n"),
            # the example's gres.conf, its Include pointed at this test's folder
            (f"{WORK}/gres.conf", gres_conf.replace(example["slurm"]["gres_mig"]["conf"], f"{WORK}/gres-mig.conf")),
        ]:
            _put(host, path, text)
        written = host.run(
            f"python3 {WORK}/gpucluster-mig-gres --config {WORK}/gres-mig.json --out {WORK}/gres-mig.conf "
            f"--lci {WORK}/driver/lci --minors {WORK}/driver/mig-minors --query {WORK}/driver/q"
        )
        assert written.rc == 0, written.stderr
        lines = [x for x in host.file(f"{WORK}/gres-mig.conf").content_string.splitlines() if x.startswith("NodeName=")]
        files = sorted(
            {f for x in lines for f in x.split("Files=" if "MultipleFiles=" in x else "File=")[1].split(",")}
        )
        caps = [f for f in files if f.startswith(CAPS + "/")]
        host.check_output(f"mkdir {CAPS} && for f in {' '.join(caps)}; do ln -s /dev/null $f; done")
        # slurmd parses the GRES: one record per planned MIG device and whole GPU, the example's types and counts
        parsed = host.run(f"slurmd -f {WORK}/slurm.conf -G")
        records = [x for x in (parsed.stdout + parsed.stderr).splitlines() if "Gres Name=gpu" in x]
        types = Counter(x.split("Type=")[1].split()[0] for x in records)
        planned = {p.split(":")[1]: int(p.split(":")[2]) for p in line["gres"].split(",")}
        assert types == Counter(planned), (parsed.stdout, parsed.stderr)
        assert len(records) == len(lines) == sum(planned.values())
        # slurmd starts and registers: its controller lists the node idle with the example's GRES
        host.check_output(f"slurmctld -f {WORK}/slurm.conf && slurmd -f {WORK}/slurm.conf")
        shown = host.check_output(
            f"for i in $(seq 60); do out=$({env} sinfo --noheader --Node --format='%N|%G|%t' 2>/dev/null); "
            f'case $out in *"|idle") break;; esac; sleep 1; done; echo "$out"'
        )
        assert shown.strip() == f"{node}|{line['gres']}|idle", (shown, host.run(f"tail -5 {WORK}/slurmd.log").stdout)
        assert "slurmd version 22.05" in host.file(f"{WORK}/slurmd.log").content_string
    finally:
        host.run(
            f"for p in {WORK}/slurmd.pid {WORK}/slurmctld.pid; do [ -s $p ] && kill $(cat $p); done; "
            f"for i in $(seq 30); do pgrep -f 'slurm(ctl)?d -f {WORK}/' >/dev/null || break; sleep 1; done; "
            f"rm -rf {CAPS} {WORK}"
        )
