"""What each component's service account may do, asked of the real API server's RBAC
authorizer as that account (impersonated with its groups, as its token would authenticate):
every rule it holds, compared whole with what it needs, in its own namespace, another one and
kube-node-lease (node heartbeats). A rule that any authenticated user holds is left out.

What each needs, read at the source:
- Multus thick v4.1.4 (pkg/k8sclient/k8sclient.go): gets a pod and updates its network-status
  annotation (pods, pods/status: get, update; list and watch for its pod informer), reads
  NetworkAttachmentDefinitions (get, list, watch), records events.
- Whereabouts v0.9.4: the CNI plugin and the reconcilers manage IPPools,
  OverlappingRangeIPReservations and NodeSlicePools; the plugin's leader election takes a
  Lease named after the pool in the namespace of its kubeconfig's context, which
  script/install-cni.sh sets to WHEREABOUTS_NAMESPACE (pkg/storage/kubernetes/ipam.go:
  newLeaderElector; client-go's LeaseLock gets, creates and updates it); the reconcilers list
  pods and nodes; the plugin reads NADs; events.
- cleartaints: gets its node and patches it, and deletes NodeClaims (its two
  ValidatingAdmissionPolicies narrow the patch to the startup taint of its own node, the
  delete to its own node's claim).
- The pod IP agent has no token (automountServiceAccountToken: false)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.objects import RBAC_KINDS, apply_objects, delete_objects
from tests.cluster_box.objects import manifests_in_order
from tests.conftest import SynthesizedApp

pytestmark = pytest.mark.cluster_box

Rule = tuple[str, str, str]  # (API group, resource, verb)

NADS = "k8s.cni.cncf.io"
WHEREABOUTS = "whereabouts.cni.cncf.io"
EVENTS = {("", "events"), ("events.k8s.io", "events")}


def rules(group: str, resources: tuple[str, ...], verbs: tuple[str, ...]) -> set[Rule]:
    return {(group, resource, verb) for resource in resources for verb in verbs}


MULTUS = (
    rules(NADS, ("network-attachment-definitions",), ("get", "list", "watch"))
    | rules("", ("pods", "pods/status"), ("get", "list", "watch", "update"))
    | {(g, r, v) for g, r in EVENTS for v in ("create", "patch", "update")}
)
WHEREABOUTS_CLUSTER = (
    rules(
        WHEREABOUTS,
        ("ippools", "overlappingrangeipreservations", "nodeslicepools"),
        ("get", "list", "watch", "create", "update", "patch", "delete"),
    )
    | rules("", ("pods", "nodes"), ("get", "list", "watch"))
    | rules(NADS, ("network-attachment-definitions",), ("get", "list", "watch"))
    | {(g, r, v) for g, r in EVENTS for v in ("create", "patch", "update", "get")}
)
WHEREABOUTS_OWN_NAMESPACE = rules("coordination.k8s.io", ("leases",), ("get", "create", "update"))
CLEARTAINTS = rules("", ("nodes",), ("get", "patch")) | rules(
    "karpenter.sh", ("nodeclaims",), ("delete",)
)

# (namespace, service account) -> namespace asked in -> every rule it must hold there, no more
EXPECTED: dict[tuple[str, str], dict[str, set[Rule]]] = {
    ("kube-system", "multus"): {
        "kube-system": MULTUS,
        "default": MULTUS,
        "kube-node-lease": MULTUS,
    },
    ("kube-system", "whereabouts"): {
        "kube-system": WHEREABOUTS_CLUSTER | WHEREABOUTS_OWN_NAMESPACE,
        "default": WHEREABOUTS_CLUSTER,
        "kube-node-lease": WHEREABOUTS_CLUSTER,
    },
    ("cleartaints", "cleartaints"): {
        "cleartaints": CLEARTAINTS,
        "default": CLEARTAINTS,
        "kube-node-lease": CLEARTAINTS,
    },
}


def held_rules(plane: ControlPlane, namespace: str, account: str, asked_in: str) -> set[Rule]:
    """The rules the API server's authorizer gives the account in `asked_in`
    (SelfSubjectRulesReview, impersonated), expanded to (group, resource, verb)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": asked_in},
    }
    answer = json.loads(
        plane.kubectl(
            "create",
            "--validate=false",  # client-side schema checks would need the account to list CRDs
            "-o",
            "json",
            f"--as=system:serviceaccount:{namespace}:{account}",
            "--as-group=system:serviceaccounts",
            f"--as-group=system:serviceaccounts:{namespace}",
            "-f",
            "-",
            stdin=json.dumps(review),
        )
    )
    return {
        (group, resource, verb)
        for rule in answer["status"]["resourceRules"]
        for group in rule.get("apiGroups", [""])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


@pytest.fixture(scope="module")
def rbac_applied(cluster_box: ControlPlane, five_g_core_app: SynthesizedApp) -> Iterator[None]:
    template = five_g_core_app.template_json(five_g_core_app.stage.cluster)
    objects = [
        o
        for m in manifests_in_order(template)
        for o in m
        if o["kind"] in ("Namespace", *RBAC_KINDS)
    ]
    apply_objects(cluster_box, objects)
    yield
    delete_objects(cluster_box, objects)


@pytest.mark.parametrize(
    ("account", "asked_in"), [(a, n) for a in EXPECTED for n in EXPECTED[a]], ids=str
)
def test_each_service_account_holds_exactly_what_it_needs(
    cluster_box: ControlPlane, rbac_applied: None, account: tuple[str, str], asked_in: str
) -> None:
    namespace, name = account
    baseline = held_rules(cluster_box, namespace, "nobody-bound", asked_in)
    assert (
        held_rules(cluster_box, namespace, name, asked_in) - baseline == EXPECTED[account][asked_in]
    )
