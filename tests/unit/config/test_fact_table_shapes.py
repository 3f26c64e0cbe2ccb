"""The shape every entry of the fact tables must have, whatever its value: a typo in one row of
a table fails here even where no other test looks at that row."""

from __future__ import annotations

import itertools
import re

import pytest

from config import aws_regions, karpenter_releases
from config.interface_names import RESERVED_INTERFACE_NAMES, reserved_interface_reason
from config.patterns import PLAIN_PATTERNS


def minor_of(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.parametrize("region", sorted(aws_regions.AVAILABILITY_ZONE_LETTERS))
def test_zone_letters_are_distinct_lowercase_letters_in_order(region: str) -> None:
    letters = aws_regions.AVAILABILITY_ZONE_LETTERS[region]
    assert re.fullmatch(r"[a-z]+", letters), letters
    assert list(letters) == sorted(set(letters)), letters
    # Every Region has at least the three zones AWS builds new Regions with, but for a few
    # older ones that keep two.
    assert len(letters) >= 2


def test_zone_names_are_the_region_and_a_letter() -> None:
    assert aws_regions.availability_zones("eu-west-1") == ["eu-west-1a", "eu-west-1b", "eu-west-1c"]


@pytest.mark.parametrize(
    ("region", "hint"),
    [("us-west2", "did you mean us-west-2?"), ("mars-1", "for example us-west-2")],
)
def test_an_unknown_region_gets_a_hint(region: str, hint: str) -> None:
    problem = aws_regions.region_problem(region)
    assert problem is not None and hint in problem


def test_karpenter_minors_are_listed_in_release_order_with_patches_from_zero() -> None:
    minors = list(karpenter_releases.KARPENTER_RELEASES)
    assert minors == sorted(minors, key=minor_of)
    for minor, release in karpenter_releases.KARPENTER_RELEASES.items():
        assert release.patches == tuple(range(len(release.patches))), minor
        assert release.patches, minor
        assert minor_of(release.kubernetes_min) <= minor_of(release.kubernetes_max), minor


def test_a_karpenter_minor_never_supports_fewer_kubernetes_minors_than_the_one_before() -> None:
    # Karpenter raises its newest Kubernetes minor over time and never drops one in a patch.
    releases = list(karpenter_releases.KARPENTER_RELEASES.values())
    for older, newer in itertools.pairwise(releases):
        assert minor_of(newer.kubernetes_max) >= minor_of(older.kubernetes_max)


@pytest.mark.parametrize(
    ("kubernetes", "expected"), [("1.25", None), ("1.26", "1.5.0"), ("1.37", None)]
)
def test_first_supporting_release_outside_the_known_range(
    kubernetes: str, expected: str | None
) -> None:
    assert karpenter_releases.first_supporting(kubernetes) == expected


@pytest.mark.parametrize("pattern", sorted(RESERVED_INTERFACE_NAMES))
def test_every_reserved_name_pattern_has_a_reason_and_catches_its_own_example(
    pattern: str,
) -> None:
    example = {
        "lo": "lo",
        r"eth[0-9]+": "eth3",
        r"ens[0-9]+": "ens7",
        r"enp[0-9]+s[0-9]+": "enp39s0",
        r"eni[0-9a-f]*": "eni5f1c0a9b2d4",
        r"vlan[0-9]*": "vlan12",
        r"dummy[0-9]*": "dummy12",
    }[pattern]
    reason = reserved_interface_reason(example)
    assert reason is not None and RESERVED_INTERFACE_NAMES[pattern] in reason


@pytest.mark.parametrize("name", ["eth", "ens", "enp5", "ethernet0", "lo0", "eni0x"])
def test_names_that_only_start_like_a_reserved_one_are_free(name: str) -> None:
    assert reserved_interface_reason(name) is None


@pytest.mark.parametrize("regex", sorted(PLAIN_PATTERNS))
def test_plain_words_read_as_the_end_of_a_sentence(regex: str) -> None:
    # config/messages.py writes "'<input>' is not <allowed>; for example <example>".
    allowed = PLAIN_PATTERNS[regex].allowed
    assert re.match(r"[a-z0-9]", allowed), allowed
    assert not allowed.endswith((".", ";")), allowed
