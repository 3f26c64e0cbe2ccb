"""The `images` section: every container image the app deploys, each replaceable by a mirror.

Telco clusters often pull only from a private registry. Each entry takes a repository and a tag
or a digest (or both); left out, the image is the default listed in docs/images.md. Images that
a Helm chart pins itself (Karpenter's controller, node-latency-for-k8s) keep the chart's choice
unless set here, and Multus' default registry depends on the region (EKS add-on registries).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator, model_validator

from config import patterns
from config.coercion import STRICT_SECTION

WHEREABOUTS_REPOSITORY = "ghcr.io/k8snetworkplumbingwg/whereabouts"
WHEREABOUTS_TAG = "v0.9.4"
# The AL2023 container image (bash and curl-minimal, which cleartaints' script needs), by a
# dated release tag: AWS does not move those.
CLEARTAINTS_REPOSITORY = "public.ecr.aws/amazonlinux/amazonlinux"
CLEARTAINTS_TAG = "2023.9.20251117.1"
MULTITOOL_REPOSITORY = "wbitt/network-multitool"
MULTITOOL_TAG = "3.22.2"


class ImageRef(BaseModel):
    """repository[:tag][@digest]; a tag, a digest or both, never `latest`."""

    model_config = STRICT_SECTION

    repository: str = Field(
        pattern=patterns.IMAGE_REPOSITORY.regex,
        description="Registry host and path, e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/"
        "mirror/whereabouts.",
    )
    tag: str | None = Field(
        default=None, pattern=patterns.IMAGE_TAG.regex, description="Image tag, never latest."
    )
    digest: str | None = Field(
        default=None,
        pattern=patterns.IMAGE_DIGEST.regex,
        description="Image digest (sha256:<64 hex digits>); given both, nodes pull by digest.",
    )

    @field_validator("repository", "tag", mode="before")
    @classmethod
    def _digest_in_its_own_field(cls, value: object) -> object:
        # `crane digest` and registry consoles print repository@sha256:... references; the
        # config keeps the three parts apart so that each has its own check.
        if isinstance(value, str) and "@" in value:
            before, _, digest = value.partition("@")
            raise ValueError(
                f"{value!r} holds a digest: give {before!r} here and the digest as the image's "
                f"own field, digest: {digest!r}"
            )
        return value

    @model_validator(mode="after")
    def _pinned(self) -> ImageRef:
        if self.tag is None and self.digest is None:
            raise ValueError(
                f"image {self.repository!r} needs a tag or a digest (sha256:...); "
                "an unpinned image changes under a running cluster"
            )
        if self.tag == "latest":
            raise ValueError(
                f"image {self.repository!r}: pin a release tag or a digest instead of 'latest'"
            )
        return self

    @property
    def reference(self) -> str:
        """What a container's `image` field takes."""
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.repository}{tag}{digest}"

    def helm_values(self) -> dict[str, str]:
        """The repository/tag/digest triple most charts (Karpenter, node-latency) accept."""
        values = {"repository": self.repository}
        if self.tag:
            values["tag"] = self.tag
        # An empty digest tells the chart not to append its own default digest.
        values["digest"] = self.digest or ""
        return values


class ImagesConfig(BaseModel):
    """Container images; None keeps a region- or chart-dependent default (see docs/images.md)."""

    model_config = STRICT_SECTION

    multus: ImageRef | None = Field(
        default=None,
        description="Default: the EKS build in the region's EKS add-on registry "
        "(<account>.dkr.ecr.<region>.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick).",
    )
    whereabouts: ImageRef = Field(
        default=ImageRef(repository=WHEREABOUTS_REPOSITORY, tag=WHEREABOUTS_TAG),
        description="Whereabouts daemonset and IP reconciler.",
    )
    cleartaints: ImageRef = Field(
        default=ImageRef(repository=CLEARTAINTS_REPOSITORY, tag=CLEARTAINTS_TAG),
        description="cleartaints daemonset (needs bash and curl).",
    )
    # The same AL2023 image: its python3 (3.9, dnf needs it) runs the agent, the version the
    # CNI plugin meets on the host; one pull serves both DaemonSets.
    multus_pod_ips: ImageRef = Field(
        default=ImageRef(repository=CLEARTAINTS_REPOSITORY, tag=CLEARTAINTS_TAG),
        description="Multus pod IP agent daemonset (needs python3; the plugin runs on the host).",
    )
    karpenter_controller: ImageRef | None = Field(
        default=None,
        description="Default: the image the karpenter chart of karpenter.version pins "
        "(public.ecr.aws/karpenter/controller:<version>@sha256:...).",
    )
    sample_workloads: ImageRef = Field(
        default=ImageRef(repository=MULTITOOL_REPOSITORY, tag=MULTITOOL_TAG),
        description="Multitool of the optional sample workloads (extras.sample_workloads).",
    )
    node_latency: ImageRef | None = Field(
        default=None,
        description="Default: the image the node-latency-for-k8s chart pins.",
    )

    def tag_only_host_images(self) -> list[str]:
        """The images of pods with node-level rights (privileged, root or host network, host
        paths, node RBAC), pinned by tag only.
        Whoever controls the registry (or the mirror) can move a tag to other bytes, which
        then run with the node's rights at the next pull; a digest names the bytes."""
        images = {
            "multus": (self.multus, "Multus: privileged, writes the node's CNI configuration"),
            "whereabouts": (
                self.whereabouts,
                "Whereabouts and its IP reconciler: root on the host network, installs its CNI "
                "plugin on the node",
            ),
            "cleartaints": (
                self.cleartaints,
                "cleartaints: reads the node's CNI and readiness state, clears node taints",
            ),
            "multus_pod_ips": (
                self.multus_pod_ips,
                "the Multus pod IP agent: host network, installs its CNI plugin on the node and "
                "holds the node role's ENI rights",
            ),
        }
        tag_only = [
            f"images.{field} ({component})"
            for field, (image, component) in images.items()
            if image is None or image.digest is None
        ]
        if not tag_only:
            return []
        return [
            f"{'; '.join(tag_only)}: pinned by tag only. A tag can be moved to other bytes; "
            "give each image's digest (images.<name>.digest: sha256:..., docs/images.md)"
        ]
