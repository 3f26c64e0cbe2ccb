"""Karpenter ANDs the NodePool requirements: each contradiction is named once, with its field.

Sizes used (EC2 instance type specifications): m5 and c5 both have 2-vCPU (large) and 16-vCPU
(4xlarge) sizes; c5 has 36 vCPUs (c5.9xlarge) where m5 has 32 (m5.8xlarge); m6g is Graviton
(arm64); m4 is a Xen, not Nitro, family; t3 is in category t.
"""

from __future__ import annotations

import pytest

from config.node_pool_rules import label_problems, node_pool_requirement_problems, taint_problems


def test_families_in_their_categories_with_sizes_in_common_are_fine() -> None:
    assert node_pool_requirement_problems(["m", "c"], ["m5", "c5"], [2, 16]) == []


def test_a_vcpu_count_one_family_has_is_enough() -> None:
    # c5.9xlarge has 36 vCPUs and m5 has no such size: the pool still launches c5 at 36.
    assert node_pool_requirement_problems(["m", "c"], ["m5", "c5"], [2, 36]) == []


@pytest.mark.parametrize(
    ("family", "categories", "names"),
    [
        ("m5x", ["m"], "'m5x' is not an EC2 instance family"),
        ("m6g", ["m"], "m6g is arm64"),
        ("t3", ["m"], "t3 is in category 't'"),
        ("m4", ["m"], "m4 has no network-interface data"),
    ],
)
def test_an_unusable_family_is_the_only_problem_named(
    family: str, categories: list[str], names: str
) -> None:
    # Not followed by "no size of [] has [2] vCPUs": the family problem is the whole story.
    problems = node_pool_requirement_problems(categories, [family], [2])
    assert len(problems) == 1
    assert problems[0].startswith("instance_families: ")
    assert names in problems[0]


def test_an_unusable_family_beside_a_usable_one_is_named_alone() -> None:
    problems = node_pool_requirement_problems(["m"], ["m6g", "m5"], [2])
    assert len(problems) == 1
    assert "m6g is arm64" in problems[0]


def test_a_family_in_a_listed_category_is_usable() -> None:
    assert node_pool_requirement_problems(["m"], ["m5"], [2]) == []
    assert node_pool_requirement_problems(["c"], ["m5"], [2]) != []


def test_a_vcpu_count_no_usable_family_has_is_named_under_instance_cpus() -> None:
    problems = node_pool_requirement_problems(["m"], ["m5"], [2, 36])
    assert len(problems) == 1
    assert problems[0].startswith("instance_cpus: no size of ['m5'] has [36] vCPUs")


def test_a_family_without_any_listed_size_is_named_under_instance_families() -> None:
    problems = node_pool_requirement_problems(["m", "c"], ["m5", "c5"], [36])
    assert problems == [problems[0]]
    assert problems[0].startswith("instance_families: m5 has no size with [36] vCPUs")


def test_when_no_family_has_any_listed_size_only_the_vcpus_are_named() -> None:
    problems = node_pool_requirement_problems(["m", "c"], ["m5", "c5"], [3])
    assert len(problems) == 1
    assert problems[0].startswith("instance_cpus: ")


def test_the_close_family_name_is_suggested() -> None:
    (problem,) = node_pool_requirement_problems(["m"], ["m5x"], [2])
    assert "did you mean 'm5'?" in problem


# Kubernetes, "Labels and Selectors" (syntax and character set): name part at most 63
# characters, alphanumeric at both ends; prefix a DNS subdomain of at most 253 characters.
@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("network-function", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("example.com/" + "a" * 63, True),
        ("example.com/" + "a" * 64, False),
        (("a" * 61 + ".") * 4 + "c/x", True),  # a 249-character prefix
        ("b" * 250 + ".cd/x", True),  # a 253-character prefix
        ("b" * 251 + ".cd/x", False),  # 254
        ("x.y_z", True),
        ("-upf", False),
        ("upf-", False),
        ("Example.com/upf", False),  # the prefix is lowercase DNS
        ("example.com/", False),
        ("a/b/c", False),
        ("", False),
    ],
)
def test_label_keys_follow_kubernetes_syntax(key: str, valid: bool) -> None:
    assert (label_problems({key: "v"}) == []) is valid, label_problems({key: "v"})
    assert (taint_problems([(key, "v", "NoSchedule")]) == []) is valid


@pytest.mark.parametrize(
    ("value", "valid"),
    [("", True), ("v" * 63, True), ("v" * 64, False), ("a.b_c-d", True), ("-a", False)],
)
def test_label_and_taint_values_follow_kubernetes_syntax(value: str, valid: bool) -> None:
    assert (label_problems({"example.com/k": value}) == []) is valid
    assert (taint_problems([("example.com/k", value, "NoSchedule")]) == []) is valid


@pytest.mark.parametrize(
    "key",
    [
        "karpenter-node",  # this app's label of every Karpenter node
        "multus.network/n3",  # this app's label per attached network
        "karpenter.sh/capacity-type",  # karpenter.sh_nodepools.yaml: the domain is Karpenter's
        "team.karpenter.sh/x",  # ... and its subdomains (the CRD's rule: endsWith)
        "karpenter.k8s.aws/instance-family",
        "kubernetes.io/hostname",
    ],
)
def test_labels_the_app_or_karpenter_set_are_refused(key: str) -> None:
    (problem,) = label_problems({key: "x"})
    assert problem.startswith(f"labels: {key!r} is set by")


@pytest.mark.parametrize("key", ["karpenter-nodes", "multus.networks/n3", "example.com/karpenter"])
def test_labels_next_to_the_reserved_ones_pass(key: str) -> None:
    assert label_problems({key: "x"}) == []


def test_taints_the_app_or_karpenter_set_are_refused_and_a_repeat_is_named() -> None:
    assert taint_problems([("multus/not-ready", "", "NoSchedule")])[0].startswith(
        "taints[0]: 'multus/not-ready' is the startup taint"
    )
    assert (
        "karpenter.sh domain" in taint_problems([("karpenter.sh/disrupted", "", "NoSchedule")])[0]
    )
    assert (
        taint_problems(
            [("example.com/upf", "", "NoSchedule"), ("example.com/upf", "x", "NoExecute")]
        )
        == []
    )
    (repeat,) = taint_problems(
        [("example.com/upf", "", "NoSchedule"), ("example.com/upf", "x", "NoSchedule")]
    )
    assert repeat.startswith("taints[1]: example.com/upf:NoSchedule is listed twice")
