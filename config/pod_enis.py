"""The ENIs a pool's nodes leave for pods: its own Multus ENIs, and Karpenter's reservedENIs.

Karpenter v1.14.1 (aws/karpenter-provider-aws pkg/providers/instancetype/types.go) counts the
pods an instance type holds in `ENILimitedPods`, which `pods()` calls with
`options.FromContext(ctx).ReservedENIs` (the chart's settings.reservedENIs, one value for the
whole controller) whenever the EC2NodeClass sets no kubelet.maxPods, as this app's never do:

    usableNetworkInterfaces := lo.Max([]int64{int64(int(networkInterfaces) - reservedENIs -
        numEFAOnly), 0})
    if usableNetworkInterfaces == 0 {
        return resource.NewQuantity(0, resource.DecimalSI)
    }
    return usableNetworkInterfaces*(addressesPerInterface-1) + 2

(networkInterfaces: the default network card's MaximumNetworkInterfaces; numEFAOnly: 0, the
app attaches no EFA). A size whose interfaces reservedENIs takes all of gets 0 pods. Karpenter
does not drop it from the pool, but no pod ever fits it: every pod requests one pod
(sigs.k8s.io/karpenter v1.14.1 pkg/utils/resources, `RequestsForPods`), and the scheduler keeps
an instance type only if its allocatable holds the requests (pkg/controllers/provisioning/
scheduling/nodeclaim.go, `filterInstanceTypesByRequirements` -> `fits` -> `resources.Fits`). So
the size is never launched: a pool of such sizes only never gets a node ("no instance type met
the requirements/resources/offering tuple"), and a pool with others silently loses these.

The app sets reservedENIs to the most Multus ENIs any pool attaches to network card 0
(docs/node-capacity.md), so a pool of small sizes next to one that attaches many networks can
land there although its own networks fit: both cases are refused, naming the sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from config import instance_types


@dataclass(frozen=True)
class PoolInterfaces:
    """What the ENI checks read of a pool: where it is in the config (node_pools[i] (name)),
    the Multus ENIs its nodes attach to network card 0, and its sizes as (family, vCPUs,
    network interfaces of card 0)."""

    path: str
    multus_enis: int
    sizes: Sequence[tuple[str, int, int]]


def reserved_enis(pools: Sequence[PoolInterfaces]) -> int:
    """Karpenter's settings.reservedENIs: the most Multus ENIs any pool's nodes attach to
    network card 0."""
    return max(pool.multus_enis for pool in pools)


def pod_interfaces(interfaces: int, reserved: int) -> int:
    """ENILimitedPods' usableNetworkInterfaces: the default card's interfaces Karpenter counts
    pods on (0: the instance type gets 0 pods)."""
    return max(interfaces - reserved, 0)


def own_eni_problem(pool: PoolInterfaces) -> str | None:
    """The pool's Multus ENIs and its primary interface must fit its smallest size."""
    needed = pool.multus_enis + 1  # plus the primary interface
    # Fewest interfaces; among equals, the fewest vCPUs (sizes of families tie).
    family, cpus, available = min(pool.sizes, key=lambda size: (size[2], size[1]))
    if needed <= available:
        return None
    return (
        f"{pool.path}.networks: {pool.multus_enis} Multus ENIs (one per network, enis_per_node "
        f"per host-device network) need {needed} network interfaces per "
        f"node, but the smallest size in {pool.path}.instance_cpus ({cpus} vCPUs) has "
        f"{available} ({family}); drop small sizes from instance_cpus, attach "
        "fewer networks or lower enis_per_node"
    )


def zero_pod_problems(pools: Sequence[PoolInterfaces]) -> list[str]:
    """One line per pool with sizes whose every interface reservedENIs takes (0 pods: never
    launched), naming the pool that sets reservedENIs."""
    reserved = reserved_enis(pools)
    owner = next(pool for pool in pools if pool.multus_enis == reserved)
    problems = []
    for pool in pools:
        empty = [size for size in pool.sizes if pod_interfaces(size[2], reserved) == 0]
        if empty:
            problems.append(_zero_pod_problem(pool, empty, reserved, owner))
    return problems


def _zero_pod_problem(
    pool: PoolInterfaces,
    empty: Sequence[tuple[str, int, int]],
    reserved: int,
    owner: PoolInterfaces,
) -> str:
    names = ", ".join(instance_types.size_name(family, cpus) for family, cpus, _ in empty[:5])
    more = f" and {len(empty) - 5} more" if len(empty) > 5 else ""
    most = max(interfaces for _, _, interfaces in empty)
    outcome = (
        "the pool never gets a node"
        if len(empty) == len(pool.sizes)
        else "the pool launches only its other sizes"
    )
    families = sorted({family for family, _, _ in pool.sizes})
    larger = sorted(
        {
            cpus
            for family in families
            for cpus, interfaces in instance_types.NODE_POOL_FAMILIES[family].items()
            if pod_interfaces(interfaces, reserved) > 0
        }
    )
    instead = (
        f"in {', '.join(families)}: instance_cpus {larger[:6]}"
        if larger
        else f"none in {', '.join(families)}: pick other instance_families"
    )
    return (
        f"{pool.path}.instance_cpus: {names}{more} have {most} network interfaces or fewer, all "
        f"of which settings.reservedENIs {reserved} takes (the Multus ENIs of {owner.path}, "
        "the most of any pool; Karpenter reserves them on every pool's nodes), so Karpenter "
        "gives these sizes 0 pods and never launches them (aws/karpenter-provider-aws v1.14.1 "
        f"ENILimitedPods): {outcome}; keep only sizes with more than {reserved} network "
        f"interfaces ({instead}) by raising instance_cpus or changing instance_families, or "
        f"attach fewer networks to {owner.path}"
    )
