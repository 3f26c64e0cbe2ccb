"""Routes that follow a pod: a range the pod answers for (a UPF's UE pool) routed to its node.

EC2 has no "create or replace" of a route, so each route table gets ReplaceRoute first (the
route exists once any pod of the range has started: the usual case, a pod that moved), then
CreateRoute when EC2 answers that there is none. EC2 reports a missing route to ReplaceRoute
as InvalidParameterValue ("There is no route defined for ..."), not InvalidRoute.NotFound
(getmoto/moto#6425, checked against EC2 by its author); both are taken to mean it. A CreateRoute
that loses a race with another node's (RouteAlreadyExists, "Error codes for the Amazon EC2
API") is followed by one more ReplaceRoute: the last ADD wins, like the pod's addresses.

The agent never deletes such a route (see docs/multus-pod-ips.md, "Routes that follow a pod"):
EC2's DeleteRoute takes no condition on the route's target, so a DEL racing the next pod's ADD
on another node could delete the route that node has just set, while a route left on a node
without the pod only drops the range's packets there until the next ADD replaces it (and
becomes a blackhole route once the ENI is deleted with its instance).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..cni_plugin import EC2_REFUSED, TRY_AGAIN_LATER
from .config import AgentError
from .ec2_query import Ec2Client, Ec2Error

LOG = logging.getLogger("multus-pod-ips")

#: What EC2 answers ReplaceRoute for a destination the route table has no route for.
NO_ROUTE_CODES = frozenset({"InvalidParameterValue", "InvalidRoute.NotFound"})
ROUTE_EXISTS_CODE = "RouteAlreadyExists"


def point_routes(
    ec2: Ec2Client,
    route_tables: Sequence[str],
    ranges: Sequence[str],
    eni_id: str,
    deadline: float,
) -> None:
    """Routes each range in each route table to the ENI; AgentError when EC2 refuses."""
    for route_table in route_tables:
        for cidr in ranges:
            try:
                _point_route(ec2, route_table, cidr, eni_id, deadline)
            except Ec2Error as error:
                raise AgentError(
                    TRY_AGAIN_LATER if error.retryable else EC2_REFUSED,
                    f"cannot route {cidr} in {route_table} to {eni_id}: {error}",
                ) from None
            LOG.info("%s: %s routed to %s", route_table, cidr, eni_id)


def _point_route(ec2: Ec2Client, route_table: str, cidr: str, eni_id: str, deadline: float) -> None:
    params = {
        "RouteTableId": route_table,
        "DestinationCidrBlock": cidr,
        "NetworkInterfaceId": eni_id,
    }
    try:
        ec2.call("ReplaceRoute", params, deadline)
        return
    except Ec2Error as error:
        if error.code not in NO_ROUTE_CODES:
            raise
    try:
        ec2.call("CreateRoute", params, deadline)
    except Ec2Error as error:
        if error.code != ROUTE_EXISTS_CODE:
            raise
        ec2.call("ReplaceRoute", params, deadline)
