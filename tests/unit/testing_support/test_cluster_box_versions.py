"""The box runs the Kubernetes minor the config deploys by default, and its staging modules are
the releases of that same Kubernetes (k8s.io/kubernetes v1.M.P publishes k8s.io/<staging> at
v0.M.P)."""

from __future__ import annotations

import re

from config import parse_config
from testing_support.cluster_box.build import GO_MODULES, pinned_version


def test_the_box_runs_the_default_kubernetes_minor() -> None:
    version = pinned_version("kubernetes", "k8s.io/kubernetes")
    minor = ".".join(version.removeprefix("v").split(".")[:2])
    assert minor == parse_config({}).cluster.kubernetes_version


def test_every_staging_module_is_replaced_by_the_release_of_the_same_kubernetes() -> None:
    version = pinned_version("kubernetes", "k8s.io/kubernetes").removeprefix("v1.")
    go_mod = (GO_MODULES / "kubernetes" / "go.mod").read_text()
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => (k8s\.io/\S+) (v\S+)$", go_mod, re.MULTILINE)
    assert len(replaced) >= 30
    assert all(old == new and release == f"v0.{version}" for old, new, release in replaced)


def test_etcd_is_a_3_6_release() -> None:
    # kube-apiserver 1.35 is tested against etcd 3.6 (kubeadm's DefaultEtcdVersion 3.6.6); Debian's
    # 3.4 is older than it supports.
    assert pinned_version("etcd", "go.etcd.io/etcd/server/v3").startswith("v3.6.")
