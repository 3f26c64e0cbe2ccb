"""The `images` section on its own: pinning rules, the reference a container gets, the Helm
values a chart gets, and the defaults docs/images.md lists (the operator's mirroring list)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from config.images import ImageRef, ImagesConfig

REPO = Path(__file__).resolve().parents[3]
MIRROR = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirror/whereabouts"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("pins", "reference"),
    [
        ({"tag": "v0.9.4"}, f"{MIRROR}:v0.9.4"),
        ({"digest": DIGEST}, f"{MIRROR}@{DIGEST}"),
        # Both: the OCI form repository:tag@digest, which pulls by digest.
        ({"tag": "v0.9.4", "digest": DIGEST}, f"{MIRROR}:v0.9.4@{DIGEST}"),
    ],
)
def test_reference_is_repository_then_tag_then_digest(pins: dict[str, str], reference: str) -> None:
    assert ImageRef(repository=MIRROR, **pins).reference == reference


@pytest.mark.parametrize(
    ("pins", "values"),
    [
        # An empty digest keeps the chart from appending its own (upstream) digest to the
        # mirror's tag (docs/images.md).
        ({"tag": "1.14.1"}, {"repository": MIRROR, "tag": "1.14.1", "digest": ""}),
        # No tag key: the chart keeps its own tag, the digest decides what is pulled.
        ({"digest": DIGEST}, {"repository": MIRROR, "digest": DIGEST}),
        (
            {"tag": "1.14.1", "digest": DIGEST},
            {"repository": MIRROR, "tag": "1.14.1", "digest": DIGEST},
        ),
    ],
)
def test_helm_values_carry_the_mirror_and_never_the_charts_digest(
    pins: dict[str, str], values: dict[str, str]
) -> None:
    assert ImageRef(repository=MIRROR, **pins).helm_values() == values


def test_an_image_without_tag_or_digest_is_refused() -> None:
    with pytest.raises(ValidationError, match="needs a tag or a digest"):
        ImageRef(repository=MIRROR)


def test_latest_is_refused_but_a_tag_that_merely_contains_it_passes() -> None:
    with pytest.raises(ValidationError, match="instead of 'latest'"):
        ImageRef(repository=MIRROR, tag="latest")
    assert ImageRef(repository=MIRROR, tag="latest-2025").tag == "latest-2025"


def test_latest_with_a_digest_is_still_refused() -> None:
    # The digest would pin the pull, but the config would still read as "latest".
    with pytest.raises(ValidationError, match="instead of 'latest'"):
        ImageRef(repository=MIRROR, tag="latest", digest=DIGEST)


def test_images_are_immutable_and_unknown_keys_are_typos() -> None:
    image = ImageRef(repository=MIRROR, tag="v0.9.4")
    with pytest.raises(ValidationError, match="frozen"):
        image.tag = "v0.9.5"
    with pytest.raises(ValidationError, match="version"):
        ImageRef.model_validate({"repository": MIRROR, "tag": "v0.9.4", "version": "1"})
    with pytest.raises(ValidationError, match="whereabout"):
        ImagesConfig.model_validate({"whereabout": {"repository": MIRROR, "tag": "v0.9.4"}})
    with pytest.raises(ValidationError, match="frozen"):
        ImagesConfig().whereabouts = image


def test_chart_and_region_dependent_images_default_to_none() -> None:
    # None: the Multus image comes from the region's EKS add-on registry and the Helm charts
    # keep the images they pin (docs/images.md).
    defaults = ImagesConfig()
    assert (defaults.multus, defaults.karpenter_controller, defaults.node_latency) == (
        None,
        None,
        None,
    )


def test_multus_pod_ips_shares_the_cleartaints_image() -> None:
    # One AL2023 pull serves both DaemonSets (docs/images.md).
    defaults = ImagesConfig()
    assert defaults.multus_pod_ips == defaults.cleartaints


def test_docs_list_every_image_with_its_default() -> None:
    table = (REPO / "docs" / "images.md").read_text()
    defaults = ImagesConfig()
    for field in ImagesConfig.model_fields:
        assert f"| `images.{field}` |" in table, field
        image = getattr(defaults, field)
        if image is not None:
            assert f"| `images.{field}` | `{image.reference}`" in table, field


def test_docs_say_how_to_pin_every_image_by_digest() -> None:
    section = (REPO / "docs" / "images.md").read_text().split("## Pinning by digest")[1]
    for field in ImagesConfig.model_fields:
        assert f"| `images.{field}` |" in section, field


@pytest.mark.parametrize(
    ("tag", "accepted"),
    # OCI distribution spec: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}.
    [("v" * 128, True), ("_v1.2-rc.3", True), ("v" * 129, False), (".v1", False), ("v1/2", False)],
)
def test_tags_follow_the_oci_tag_grammar(tag: str, accepted: bool) -> None:
    if accepted:
        assert ImageRef(repository=MIRROR, tag=tag).tag == tag
    else:
        with pytest.raises(ValidationError, match="tag"):
            ImageRef(repository=MIRROR, tag=tag)


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"repository": "Mirror/whereabouts", "tag": "v0.9.4"}, "repository"),  # lowercase only
        ({"repository": "whereabouts", "tag": "v0.9.4"}, "repository"),  # no registry host
        ({"repository": MIRROR, "digest": "sha256:" + "0" * 63}, "digest"),
        ({"repository": MIRROR, "digest": "sha512:" + "0" * 64}, "digest"),
    ],
)
def test_malformed_repositories_and_digests_are_refused(fields: dict[str, str], bad: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ImageRef(**fields)
    assert [error["loc"] for error in raised.value.errors()] == [(bad,)]


@pytest.mark.parametrize(
    ("fields", "field", "kept"),
    [
        # What `crane digest`, `docker inspect` and registry consoles print: name@sha256:...
        ({"repository": MIRROR, "tag": f"v0.9.4@{DIGEST}"}, "tag", "v0.9.4"),
        ({"repository": f"{MIRROR}@{DIGEST}"}, "repository", MIRROR),
    ],
)
def test_a_digest_inside_another_field_is_refused_saying_where_it_goes(
    fields: dict[str, str], field: str, kept: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        ImageRef(**fields)
    (error,) = raised.value.errors()
    assert error["loc"] == (field,)
    assert f"give {kept!r} here" in error["msg"] and f"digest: {DIGEST!r}" in error["msg"]


def test_a_tag_without_a_digest_sign_is_unaffected() -> None:
    assert ImageRef(repository=MIRROR, tag="v0.9.4", digest=DIGEST).tag == "v0.9.4"


HOST_LEVEL = ("multus", "whereabouts", "cleartaints", "multus_pod_ips")


def digested(field: str) -> dict[str, str]:
    return {"repository": f"{MIRROR}-{field}", "tag": "v1", "digest": DIGEST}


def test_the_defaults_warn_naming_every_host_level_component() -> None:
    (warning,) = ImagesConfig().tag_only_host_images()
    assert all(f"images.{field} (" in warning for field in HOST_LEVEL)
    assert "images.sample_workloads" not in warning  # an unprivileged pod


@pytest.mark.parametrize("left_on_a_tag", HOST_LEVEL)
def test_only_the_components_without_a_digest_are_named(left_on_a_tag: str) -> None:
    images = ImagesConfig.model_validate(
        {field: digested(field) for field in HOST_LEVEL if field != left_on_a_tag}
    )
    (warning,) = images.tag_only_host_images()
    assert [field for field in HOST_LEVEL if f"images.{field} (" in warning] == [left_on_a_tag]


def test_no_warning_once_every_host_level_image_has_a_digest() -> None:
    images = ImagesConfig.model_validate({field: digested(field) for field in HOST_LEVEL})
    assert images.tag_only_host_images() == []
