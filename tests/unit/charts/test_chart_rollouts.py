"""A change to what a DaemonSet's pods read from a ConfigMap rolls them. The DaemonSet
controller replaces a pod only when the pod template changes (kubernetes
pkg/controller/daemon/update.go: pods whose controller-revision-hash is not the current
template's hash are the old ones it replaces); a mounted ConfigMap is no part of the template, so
the template carries a digest of the data the pods read (charts.building_blocks.roll_on_change).
"""

from __future__ import annotations

from typing import Any

import cdk8s

from charts.building_blocks import CONFIG_DIGEST_ANNOTATION
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps, PodIpsNodes

DIGEST = f"{CONFIG_DIGEST_ANNOTATION}/multus-pod-ips"


def template_digests(props: MultusPodIpsProps) -> dict[str, str]:
    """DaemonSet name -> the digest annotation of its pod template."""
    manifests: list[dict[str, Any]] = cdk8s.Testing.synth(
        MultusPodIpsChart(cdk8s.Testing.app(), "pod-ips", props)
    )
    return {
        m["metadata"]["name"]: m["spec"]["template"]["metadata"]["annotations"][DIGEST]
        for m in manifests
        if m["kind"] == "DaemonSet"
    }


UPF = PodIpsNodes(interfaces={"n3": ["10.0.6.32/27"]}, pool="upf")
CONTROL = PodIpsNodes(interfaces={"n2": ["10.0.4.32/27"]}, pool="control")


def props(*pools: PodIpsNodes, reconcile_seconds: int = 60) -> MultusPodIpsProps:
    return MultusPodIpsProps(image="img:1", pools=pools, reconcile_seconds=reconcile_seconds)


def test_a_pool_configuration_change_rolls_that_pools_agents_only() -> None:
    before = template_digests(props(UPF, CONTROL))
    wider_upf = PodIpsNodes(interfaces={"n3": ["10.0.6.32/27", "10.0.6.64/27"]}, pool="upf")
    after = template_digests(props(wider_upf, CONTROL))
    assert after["multus-pod-ips-upf"] != before["multus-pod-ips-upf"]
    assert after["multus-pod-ips-control"] == before["multus-pod-ips-control"]


def test_a_setting_of_every_pool_rolls_every_pool() -> None:
    before = template_digests(props(UPF, CONTROL))
    after = template_digests(props(UPF, CONTROL, reconcile_seconds=30))
    assert all(after[name] != before[name] for name in before)


def test_the_same_inputs_give_the_same_template() -> None:
    """No rollout on a deploy that changes nothing (the digest is of the data, not of when or
    where it was synthesized)."""
    assert template_digests(props(UPF, CONTROL)) == template_digests(props(UPF, CONTROL))


def test_a_deploy_time_value_gives_the_same_template_whatever_its_token_number() -> None:
    """A dual-stack pool's IPv6 pod range is the network stack's deploy-time value: the CDK puts
    it in the data as token text whose number counts the tokens made before it in the process
    (aws-cdk-lib core/lib/private/token-map.ts), which differed between two synths of the
    dual-stack example. Read as a number, every synth would roll the agents."""

    def with_ipv6_range(token_number: int) -> PodIpsNodes:
        ipv6 = f"${{Token[TOKEN.{token_number}]}}"
        return PodIpsNodes(interfaces={"n3": ["10.0.6.32/27", ipv6]}, pool="upf")

    assert template_digests(props(with_ipv6_range(101))) == template_digests(
        props(with_ipv6_range(257))
    )
    # the range's place still counts: a pool that gains one rolls
    assert template_digests(props(with_ipv6_range(101))) != template_digests(props(UPF))
