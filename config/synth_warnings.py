"""The warnings synth prints about a valid config (app.py, to stderr; the stacks' own as CDK
annotations for `cdk deploy`), each with an ID that `acknowledged_warnings` takes to silence it.

A warning says what is valid but probably not meant, or what deploy needs first; once read and
decided, it would otherwise repeat on every synth and hide a new one. Acknowledging an ID
silences every warning of that kind in that config (in a pipeline, per environment: its
overrides may add IDs); the config refuses an ID not listed here, naming the known ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

#: Each warning's ID -> what it is about (docs/configuration.md lists them).
SYNTH_WARNINGS: dict[str, str] = {
    "kubernetes-version-without-support-dates": "cluster.kubernetes_version has no EKS "
    "support dates in config/kubernetes_support.py",
    "kubernetes-version-in-extended-support": "cluster.kubernetes_version is past EKS standard "
    "support (extended support's price per cluster hour)",
    "kubernetes-version-past-extended-support": "cluster.kubernetes_version is past EKS "
    "extended support (EKS upgrades the control plane itself)",
    "no-cluster-admins": "cluster.admin_principal_arns is empty: nobody can use kubectl",
    "endpoint-open-to-the-world": "cluster.public_access_cidrs includes 0.0.0.0/0",
    "network-without-node-pool": "a Multus network that no node pool attaches",
    "route-needs-gateway-attachment": "a route to a transit or virtual private gateway, "
    "which the VPC must have attached before the network stack can create it",
    "ipv6-route-over-vpn-gateway": "an IPv6 route to a virtual private gateway, which carries "
    "IPv6 only from Direct Connect",
    "images-pinned-by-tag": "images of pods with node-level rights pinned by tag, not digest",
}


@dataclass(frozen=True)
class SynthWarning:
    """One warning: its ID (a key of SYNTH_WARNINGS) and its text."""

    id: str
    text: str

    def __post_init__(self) -> None:
        if self.id not in SYNTH_WARNINGS:
            raise ValueError(f"{self.id!r} is not a warning ID of SYNTH_WARNINGS")

    @property
    def printed(self) -> str:
        """The text with how to silence it."""
        return f'{self.text} [to acknowledge: acknowledged_warnings ["{self.id}"]]'


def warnings_of(warning_id: str, texts: Sequence[str]) -> list[SynthWarning]:
    return [SynthWarning(warning_id, text) for text in texts]


def known_warning_id(warning_id: str) -> str:
    """An acknowledged_warnings item: a known ID, else refused with the closest and the list."""
    if warning_id in SYNTH_WARNINGS:
        return warning_id
    close = difflib.get_close_matches(warning_id, list(SYNTH_WARNINGS), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(
        f"{warning_id!r} is not a warning ID; {hint}the known ones are "
        f"{', '.join(SYNTH_WARNINGS)} (each printed warning ends with its own)"
    )
