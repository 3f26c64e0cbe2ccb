"""The fleet model's arithmetic and its buckets, with figures worked out by hand.

Source of the buckets: EC2 developer guide, "Request throttling for the Amazon EC2 API", table
"Request token bucket sizes and refill rates": non-mutating actions 100/20; the unfiltered and
unpaginated subset (DescribeNetworkInterfaces among them) 50/10 when asked without a filter or
pagination; mutating actions 50/5; uncategorized AssignPrivateIpAddresses,
UnassignPrivateIpAddresses, CreateNetworkInterface, ModifyNetworkInterfaceAttribute 100/5,
CreateTags 100/10. The token bucket: a full bucket lasts capacity / (demand - refill) seconds.
"""

from __future__ import annotations

import pytest

from benchmarks.fleet_scale_bench import (
    Bucket,
    NodeCost,
    api_of,
    bucket_of,
    churn_limit,
    fleet_rates,
    nodes_within,
    scale_out,
    seconds_until_empty,
)


@pytest.mark.parametrize(
    ("action", "params", "capacity", "refill"),
    [
        ("AssignPrivateIpAddresses", {}, 100, 5),
        ("UnassignPrivateIpAddresses", {}, 100, 5),
        ("CreateNetworkInterface", {}, 100, 5),
        ("ModifyNetworkInterfaceAttribute", {}, 100, 5),
        ("CreateTags", {}, 100, 10),
        ("AttachNetworkInterface", {}, 50, 5),
        ("DescribeInstanceTypes", {"InstanceType.1": "m5.large"}, 100, 20),
        ("DescribeNetworkInterfaces", {"NetworkInterfaceId.1": "eni-1"}, 50, 10),
        ("DescribeNetworkInterfaces", {"Filter.1.Name": "attachment.instance-id"}, 100, 20),
        ("DescribeNetworkInterfaces", {"MaxResults": "5"}, 100, 20),
    ],
)
def test_each_request_takes_from_its_documented_bucket(
    action: str, params: dict[str, str], capacity: int, refill: int
) -> None:
    bucket = bucket_of(api_of(action, params))

    assert (bucket.capacity, bucket.refill) == (capacity, refill)


@pytest.mark.parametrize(("demand", "lasts"), [(4.9, None), (5.0, None), (10.0, 20.0)])
def test_a_full_bucket_lasts_capacity_over_the_excess_demand(
    demand: float, lasts: float | None
) -> None:
    # 100 tokens, 5/s: at 10 requests/s the bucket loses 5 a second, empty after 20 s.
    assert seconds_until_empty(Bucket(100, 5, "row"), demand) == lasts


COST = NodeCost(
    bootstrap={"CreateNetworkInterface": 2},
    agent_start={"DescribeInstanceTypes": 1},
    steady_per_hour={"DescribeNetworkInterfaces (unfiltered)": 120},
    per_pod={"AssignPrivateIpAddresses": 1, "UnassignPrivateIpAddresses": 1},
    teardown={"UnassignPrivateIpAddresses": 2},
    burst={"AssignPrivateIpAddresses": 4},
)


def test_fleet_rates_scale_each_phase_by_its_own_driver() -> None:
    # 864 nodes living 24 h: 864 / 86400 s = 0.01 launches (and terminations) per second.
    rates = fleet_rates(COST, nodes=864, churn=10)

    assert rates["launch"] == pytest.approx(
        {"CreateNetworkInterface": 0.02, "DescribeInstanceTypes": 0.01}
    )
    # 120 calls per node-hour on 864 nodes: 103680 per hour, 28.8 per second.
    assert rates["steady"] == pytest.approx({"DescribeNetworkInterfaces (unfiltered)": 28.8})
    assert rates["churn"] == {"AssignPrivateIpAddresses": 10, "UnassignPrivateIpAddresses": 10}
    assert rates["teardown"] == pytest.approx({"UnassignPrivateIpAddresses": 0.02})


def test_a_scale_out_adds_bootstrap_agent_start_and_the_pod_burst_of_every_node() -> None:
    # 100 nodes in 60 s: 200 CreateNetworkInterface, 100 DescribeInstanceTypes, 400 Assign.
    demand = scale_out(COST, nodes=100, seconds=60)

    assert demand == pytest.approx(
        {
            "CreateNetworkInterface": 200 / 60,
            "DescribeInstanceTypes": 100 / 60,
            "AssignPrivateIpAddresses": 400 / 60,
        }
    )
    # 400 Assign calls in a minute: 6.67/s against 100 + 5/s, empty after 100 / 1.67 = 60 s.
    assert seconds_until_empty(
        bucket_of("AssignPrivateIpAddresses"), demand["AssignPrivateIpAddresses"]
    ) == pytest.approx(60.0)


def test_the_churn_limit_is_the_tightest_apis_share_of_refill_per_call() -> None:
    # One Assign and one Unassign per pod, both 5/s: half of 5/s is 2.5 pods/s.
    assert churn_limit(COST, share=0.5) == (2.5, "AssignPrivateIpAddresses")
    assert churn_limit(NodeCost({}, {}, {}, {}, {}, {}), share=0.5) is None


def test_nodes_within_a_minute_are_limited_by_the_tightest_bucket() -> None:
    # Assign: (100 + 5/s x 60 s) / 4 per node = 100 nodes; DescribeNetworkInterfaces by ID:
    # (50 + 10/s x 60 s) / 2 = 325 nodes.
    per_node = {"AssignPrivateIpAddresses": 4, "DescribeNetworkInterfaces (unfiltered)": 2}

    assert nodes_within(per_node, seconds=60) == (100.0, "AssignPrivateIpAddresses")
