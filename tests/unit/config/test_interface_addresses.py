"""IPv4 addresses per network interface, spot-checked against their source.

Karpenter's pkg/providers/instancetype/zz_generated.vpclimits.go (IPv4PerInterface, generated from
EC2 DescribeInstanceTypes; read 2026-11-30, where every row of the table matched). The m5 rows are
also in the EC2 user guide's "IP addresses per network interface per instance type".
"""

from __future__ import annotations

import pytest

from config.interface_addresses import IPV4_ADDRESSES_PER_INTERFACE


@pytest.mark.parametrize(
    ("family", "vcpus", "addresses"),
    [
        ("m5", 2, 10),  # m5.large
        ("m5", 4, 15),  # m5.xlarge
        ("m5", 16, 30),  # m5.4xlarge
        ("m5", 96, 50),  # m5.24xlarge
        ("c5", 36, 30),  # c5.9xlarge
        ("c6in", 128, 50),  # c6in.32xlarge
        ("m8i", 8, 30),  # m8i.2xlarge
        ("m8i", 384, 64),  # m8i.96xlarge
        ("r8i", 2, 20),  # r8i.large
        ("c8a", 1, 4),  # c8a.medium
    ],
)
def test_addresses_per_interface_of_a_size(family: str, vcpus: int, addresses: int) -> None:
    assert IPV4_ADDRESSES_PER_INTERFACE[family][vcpus] == addresses
