"""The CNI components the box builds are the releases the project deploys: Multus v4.1.4 (the
EKS add-on image config/images.py names), Whereabouts at the chart's image tag, and the reference
CNI plugins at the release the AWS VPC CNI builds into its image."""

from __future__ import annotations

from config.images import WHEREABOUTS_TAG
from testing_support.cluster_box.build import (
    CNI_MODULES,
    CONTROL_PLANE_MODULES,
    PACKAGES,
    pinned_version,
)


def test_multus_is_the_thick_plugin_release_the_add_on_ships() -> None:
    assert pinned_version("multus", "gopkg.in/k8snetworkplumbingwg/multus-cni.v4") == "v4.1.4"


def test_whereabouts_is_the_release_of_the_charts_image() -> None:
    # The Go module proxy serves v0.9.4, the tag config/images.py pins: no nearest one needed.
    assert pinned_version("whereabouts", "github.com/k8snetworkplumbingwg/whereabouts") == (
        WHEREABOUTS_TAG
    )
    assert WHEREABOUTS_TAG == "v0.9.4"


def test_cni_plugins_are_the_release_the_vpc_cni_ships() -> None:
    # aws/amazon-vpc-cni-k8s Makefile, target `plugins`: FETCH_VERSION=1.9.1 (v1.23.0, v1.23.1).
    assert pinned_version("cni-plugins", "github.com/containernetworking/plugins") == "v1.9.1"


def test_the_control_plane_build_does_not_wait_for_the_cni_components() -> None:
    assert set(CONTROL_PLANE_MODULES) | set(CNI_MODULES) == set(PACKAGES)
    assert not set(CONTROL_PLANE_MODULES) & set(CNI_MODULES)
