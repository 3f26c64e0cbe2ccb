"""A Multus network's connection tracking timeouts: their limits are EC2's (botocore's EC2 model,
ConnectionTrackingSpecificationRequest: TCP established 60-432000 s, UDP stream 60-180 s, UDP
30-60 s), and the node user-data carries them to CreateNetworkInterface."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import botocore
import pytest

from config import ConfigError, parse_config
from config.connection_tracking import TIMEOUT_LIMITS
from config.node_bootstrap_plan import node_bootstrap_props
from node_bootstrap.renderer import render_configuration


def with_second_network(**changes: Any) -> dict[str, Any]:
    raw = parse_config({}).model_dump(mode="json", exclude_none=True)
    raw["multus"]["networks"][1].update(changes)
    return raw


def ec2_request_shape() -> dict[str, Any]:
    model = Path(botocore.__file__).parent / "data/ec2/2016-11-15/service-2.json.gz"
    shapes: dict[str, Any] = json.loads(gzip.decompress(model.read_bytes()))["shapes"]
    return shapes


def test_the_limits_are_those_botocore_documents_for_each_member() -> None:
    shapes = ec2_request_shape()
    request = shapes["CreateNetworkInterfaceRequest"]["members"]["ConnectionTrackingSpecification"]
    members = shapes[request["shape"]]["members"]
    assert {limit.ec2_member for limit in TIMEOUT_LIMITS.values()} == set(members)
    for limit in TIMEOUT_LIMITS.values():
        text = members[limit.ec2_member]["documentation"]
        assert f"Min: {limit.minimum} seconds" in text
        maximum = re.search(r"Max: (\d+) seconds", text)
        assert maximum is not None and int(maximum.group(1)) == limit.maximum


@pytest.mark.parametrize("field", sorted(TIMEOUT_LIMITS))
def test_each_timeout_is_accepted_at_its_limits_and_refused_past_them(field: str) -> None:
    limit = TIMEOUT_LIMITS[field]
    for seconds in (limit.minimum, limit.maximum):
        config = parse_config(with_second_network(connection_tracking={field: seconds}))
        tracking = config.multus.networks[1].connection_tracking
        assert tracking is not None and getattr(tracking, field) == seconds
    for seconds in (limit.minimum - 1, limit.maximum + 1):
        with pytest.raises(ConfigError) as refused:
            parse_config(with_second_network(connection_tracking={field: seconds}))
        assert f"multus.networks[1].connection_tracking.{field}" in str(refused.value)


def test_an_empty_block_is_refused_saying_what_to_set() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(with_second_network(connection_tracking={}))
    message = str(refused.value)
    assert "multus.networks[1].connection_tracking" in message
    assert "tcp_established_timeout" in message and "leave connection_tracking out" in message


def configuration(raw: dict[str, Any]) -> str:
    config = parse_config(raw)
    return render_configuration(
        node_bootstrap_props(
            config.cluster_name,
            config.pool_plan(config.node_pools[0]),
            subnet_id=lambda row: f"subnet-{row.network}",
            security_group_id=lambda row: f"sg-{row.network}",
        )
    )


def test_the_user_data_names_each_timeout_set_by_its_ec2_member() -> None:
    rendered = configuration(
        with_second_network(
            connection_tracking={"tcp_established_timeout": 3600, "udp_stream_timeout": 180}
        )
    )
    assert (
        "MULTUS_CONNECTION_TRACKING="
        "'multus2 TcpEstablishedTimeout=3600 UdpStreamTimeout=180'\n" in rendered
    )


def test_without_timeouts_the_user_data_has_no_connection_tracking_line() -> None:
    assert "MULTUS_CONNECTION_TRACKING" not in configuration(with_second_network())
