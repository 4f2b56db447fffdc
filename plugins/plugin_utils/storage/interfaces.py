"""The storage network of a site: the storage servers' own interfaces, the interfaces a host gets a storage
address on, and what the data servers' planned interfaces can carry at most (storage/sizing.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.errors import require
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.model import Ceiling
from ansible_collections.gpucluster.tiers.plugins.plugin_utils.storage.sizing import (
    DATA_SERVERS,
    server_links,
    storage_ceiling,
)

if TYPE_CHECKING:
    from ansible_collections.gpucluster.tiers.plugins.plugin_utils.inventory.site import Site


def server_interfaces(site: Site) -> list[str]:
    """The storage servers' storage-network interfaces (gpucluster_storage.server_interfaces; a Lustre
    site's lustre.server_interfaces when only that is set): each gets its own storage address."""
    given, p = site.storage_model.server_interfaces, site.storage_model.server_interfaces_field
    require(
        isinstance(given, list) and all(isinstance(i, str) and i for i in given) and len(set(given)) == len(given),
        p,
        given,
        "a list of the storage servers' storage-network interface names, each once",
    )
    return list(given)


def storage_nics(site: Site, roles: list[str]) -> list[str]:
    """The interfaces that get a storage address on a host with these roles (plan/addresses.py address_plan)."""
    if "compute" in roles:
        return [n.netdev for n in site.node.nics_for("storage")]
    return server_interfaces(site) if "storage" in roles else []


def site_storage_ceiling(site: Site, nodes: int, addresses: Mapping[str, Any]) -> Ceiling:
    """What a networked storage type can deliver at most, GB/s (storage/sizing.py): its data servers' planned
    storage interfaces (Lustre: the LNet ones; each card at min(its ports, its PCIe slot)) and the clients' links
    on the storage network."""
    st = site.storage_model
    on_storage = "storage" in addresses["pools"]
    if not on_storage:  # served on the management network: the servers' management interface carries it
        interfaces, field = [site.management_interface], "gpucluster_network.management.interface"
    elif st.type == "lustre" and site.lustre_model.server_interfaces:
        interfaces, field = list(site.lustre_model.server_interfaces), "gpucluster_storage.lustre.server_interfaces"
    else:
        interfaces, field = server_interfaces(site), site.storage_model.server_interfaces_field
    if on_storage:
        client_nics = site.node.nics_for("storage")
    else:
        client_nics = site.node.nics_for("management") if st.type == "nfs" else site.node.compute_nics[:1]
    rates = [n.rate_gbps for n in client_nics]
    group = DATA_SERVERS[st.type][0]
    return storage_ceiling(
        storage_type=st.type,
        servers=site.hosts_in(group),
        links=server_links(st.server_nics, interfaces),
        clients=nodes,
        client_link_gbps=sum(rates) if rates and all(rates) else None,  # type: ignore[arg-type]
        interfaces_field=field,
    )
