"""The expected cabling as an ibsim net file (plugin_utils/fabric/ibsim.py)."""

from __future__ import annotations

import copy

from conftest import cluster_plan, fabric, host_link, load_inventory

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric import ibsim
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.fabric.links import link_count


def test_netfile_declares_every_link_on_both_ends_with_unique_lids() -> None:
    cabling = fabric("tier4")["cabling"]
    text = ibsim.ibsim_netfile(cabling)
    port_lines = [ln for ln in text.splitlines() if ln.startswith("[")]
    # 64 host links, 64 uplinks and the subnet manager's port (the head's mlx5_0 on a free leaf01 port)
    assert len(port_lines) == 2 * (link_count(cabling) + len(cabling["sm_links"])) == 2 * (64 + 64 + 1)
    headers = [ln for ln in text.splitlines() if ln.startswith(("Switch", "Hca"))]
    assert len(headers) == 10 + 64 + 1
    assert headers[-1] == 'Hca 1 "head01 mlx5_0" # "head01 mlx5_0"'
    assert '[9] "head01 mlx5_0"[1] # "head01 mlx5_0" lid 75 4xHDR' in port_lines  # leaf01's first free port
    assert 'Hca 1 "compute02 mlx5_3" # "compute02 mlx5_3"' in headers  # the rdma-ndd description
    assert 'Switch 64 "spine02" # "spine02" enhanced port 0 lid 10 lmc 0' in headers
    own_lids = [int(ln.split(" lid ")[1].split()[0]) for ln in headers if ln.startswith("Switch")]
    own_lids += [int(ln.split("# lid ")[1].split()[0]) for ln in port_lines if "# lid " in ln]
    assert sorted(own_lids) == list(range(1, 10 + 64 + 1 + 1))
    # both ends of one host link: compute02's HCAs follow the 10 switches and compute01's 8 HCAs
    assert '[2] "compute02 mlx5_3"[1] # "compute02 mlx5_3" lid 22 4xHDR' in port_lines
    assert '[1] "leaf04"[2] # lid 22 lmc 0 "leaf04" lid 4 4xHDR' in port_lines


def test_netfile_renders_ndr_as_hdr_and_says_so() -> None:
    cabling = fabric("tier3")["cabling"]
    assert ibsim.lab_link(cabling) == {
        "planned": "4xNDR",
        "planned_rate_gbps": 400,
        "width": "4x",
        "speed": "HDR",
        "rate_gbps": 200.0,
        "capped": True,
    }
    text = ibsim.ibsim_netfile(cabling)
    assert "planned 4xNDR (400 Gb/s), simulated as 4xHDR (200 Gb/s)" in text.splitlines()[1]
    assert "NDR" not in "\n".join(text.splitlines()[2:])
    # a narrower link keeps its lane speed: 1x HDR
    narrowed = copy.deepcopy(cabling)
    host_link(narrowed, "compute03", 6)["width"] = "1x"
    assert '[3] "compute03 mlx5_6"[1] # "compute03 mlx5_6" lid 31 1xHDR' in ibsim.ibsim_netfile(narrowed)


def test_perfquery_ports_name_each_planned_port_as_the_netfile_does() -> None:
    plan = cluster_plan(*load_inventory("tier3"))
    ports = plan["validation"]["tests"]["port_counters"]
    sweep = ibsim.perfquery_ports(ports)
    assert len(sweep) == len(ports) == 32
    text = ibsim.ibsim_netfile(plan["fabric"]["cabling"])
    for p in sweep:
        assert f'Hca 1 "{p["sim_host"]}" # "{p["sim_host"]}"' in text  # SIM_HOST picks that HCA
        assert p["argv"] == ["perfquery", "-C", "ibsim0", "-P", "1"]
    assert sweep[0]["sim_host"] == "compute01 mlx5_0"
