"""The startup-taint remover against the real API server: examples/5g-core.json applied, a
node of its tainted upf pool registered, the pod the real DaemonSet controller bound there run
as the kubelet would run it (testing_support/cluster_box/script_container.py: the Pod's own
script and environment, a token bound to the Pod), with real curl. The real RBAC authorizer and
the real ValidatingAdmissionPolicy (CEL evaluated by the API server) decide what it may change.

- The taint goes only once the node is ready for Multus pods (every file the pod waits for);
  the pool's own taint stays.
- A taint list changed between its read and its patch (another controller's write): the JSON
  patch's test step fails at the API server and the script reads again and retries.
- The policy: a pod's token may remove the startup taint of its own node, and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.script_container import (
    Container,
    pod_token,
    start_container,
    token_kubeconfig,
)
from testing_support.karpenter_box.kubelet import boot_files
from tests.cluster_box.nodes import (
    delete_app,
    karpenter_node,
    owner,
    pods,
    register_node,
    wait_until,
)
from tests.cluster_box.objects import apply_app
from tests.conftest import SynthesizedApp
from tests.unit.stacks.test_cluster_workloads import by_kind

pytestmark = pytest.mark.cluster_box

POOL = "upf"
STARTUP_TAINT = "multus/not-ready"
# The script waits 2 s between its looks at the node's files and 5 s between patch attempts.
SETTLE_SECONDS = 6.0


def taint_keys(plane: ControlPlane, node: str) -> list[str]:
    found = json.loads(plane.kubectl("get", "node", node, "-o", "json"))
    return [t["key"] for t in found["spec"].get("taints", [])]


def ready_files(container: Container) -> list[Path]:
    """Every file the pod waits for, from its environment."""
    return boot_files(container.env)


def touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


@pytest.fixture(scope="module")
def five_g_core_applied(
    cluster_box: ControlPlane, five_g_core_app: SynthesizedApp
) -> Iterator[dict[str, Any]]:
    template = five_g_core_app.template_json(five_g_core_app.stage.cluster)
    apply_app(cluster_box, template)
    (upf,) = [p for p in by_kind(template, "NodePool") if p["metadata"]["name"] == POOL]
    yield upf
    delete_app(cluster_box, template, [])


class UpfNode:
    """A registered upf node, the remover's pod bound there, and where its host files are."""

    def __init__(self, plane: ControlPlane, node_pool: dict[str, Any], name: str, root: Path):
        self.plane, self.name, self.root = plane, name, root
        register_node(plane, name, *karpenter_node(node_pool, "us-west-2a"))
        assert wait_until(lambda: self.pod() is not None), f"no cleartaints pod on {name}"

    def pod(self) -> dict[str, Any] | None:
        for pod in pods(self.plane):
            if owner(pod) == f"cleartaints-{POOL}" and pod["spec"].get("nodeName") == self.name:
                return pod
        return None

    def start(self, **kwargs: Any) -> Container:
        pod = self.pod()
        assert pod is not None
        return start_container(self.plane, pod, self.root, **kwargs)


@pytest.fixture
def upf_node(
    cluster_box: ControlPlane,
    five_g_core_applied: dict[str, Any],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Iterator[UpfNode]:
    name = f"ct-{request.node.name.split('[')[0].removeprefix('test_')[:40]}".replace("_", "-")
    node = UpfNode(cluster_box, five_g_core_applied, name, tmp_path)
    yield node
    cluster_box.kubectl("delete", "node", name, "--wait=false")


def test_the_taint_goes_only_once_the_node_is_ready_and_the_pools_taint_stays(
    upf_node: UpfNode, cluster_box: ControlPlane
) -> None:
    before = taint_keys(cluster_box, upf_node.name)
    assert STARTUP_TAINT in before and len(before) >= 2
    container = upf_node.start()
    try:
        files = ready_files(container)
        assert len(files) >= 5
        for path in files[:-1]:
            touch(path)
        assert not wait_until(
            lambda: STARTUP_TAINT not in taint_keys(cluster_box, upf_node.name),
            timeout=SETTLE_SECONDS,
        )
        assert "waiting for" in container.output()
        touch(files[-1])
        assert wait_until(lambda: STARTUP_TAINT not in taint_keys(cluster_box, upf_node.name))
        assert taint_keys(cluster_box, upf_node.name) == [k for k in before if k != STARTUP_TAINT]
    finally:
        container.stop()


def test_a_taint_already_gone_is_done_and_nothing_else_changes(
    upf_node: UpfNode, cluster_box: ControlPlane
) -> None:
    """A restarted pod on a node whose taint it removed before."""
    node = json.loads(cluster_box.kubectl("get", "node", upf_node.name, "-o", "json"))
    rest = [t for t in node["spec"]["taints"] if t["key"] != STARTUP_TAINT]
    cluster_box.kubectl(
        "patch", "node", upf_node.name, "--type=merge", "-p", json.dumps({"spec": {"taints": rest}})
    )
    version = cluster_box.kubectl(
        "get", "node", upf_node.name, "-o", "jsonpath={.metadata.resourceVersion}"
    )
    container = upf_node.start()
    try:
        for path in ready_files(container):
            touch(path)
        assert wait_until(lambda: "is gone" in container.output())
        after = cluster_box.kubectl(
            "get", "node", upf_node.name, "-o", "jsonpath={.metadata.resourceVersion}"
        )
        assert after == version
        assert "failed" not in container.output()
    finally:
        container.stop()


# Before the script's first PATCH, another writer puts a taint in front of the list; then the
# real curl sends the patch, whose test step now looks at another taint.
CURL_WITH_A_RACE = """#!/bin/bash
if [[ " $* " == *" PATCH "* && ! -e "$RACE_DONE" ]]; then
  touch "$RACE_DONE"
  add='[{"op":"add","path":"/spec/taints/0","value":'
  taint='{"key":"example.com/other","effect":"NoSchedule"}'
  "$KUBECTL" --kubeconfig="$ADMIN_KUBECONFIG" patch node "$NODE_NAME" --type=json \\
    -p "$add$taint}]" >&2
fi
exec "$REAL_CURL" "$@"
"""


def test_a_taint_list_changed_between_read_and_patch_is_read_again(
    upf_node: UpfNode, cluster_box: ControlPlane, tmp_path: Path
) -> None:
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    (wrapper / "curl").write_text(CURL_WITH_A_RACE)
    (wrapper / "curl").chmod(0o755)
    real_curl = next(
        Path(d) / "curl"
        for d in os.environ["PATH"].split(os.pathsep)
        if (Path(d) / "curl").is_file()
    )
    container = upf_node.start(
        path_prefix=str(wrapper),
        env_overrides={
            "REAL_CURL": str(real_curl),
            "RACE_DONE": str(tmp_path / "raced"),
            "KUBECTL": str(cluster_box.binaries.kubectl),
            "ADMIN_KUBECONFIG": str(cluster_box.kubeconfig),
        },
    )
    try:
        for path in ready_files(container):
            touch(path)
        assert wait_until(lambda: STARTUP_TAINT not in taint_keys(cluster_box, upf_node.name))
        assert (tmp_path / "raced").exists()
        assert "retrying" in container.output()
        assert "example.com/other" in taint_keys(cluster_box, upf_node.name)
    finally:
        container.stop()


POLICY = "cleartaints-own-node-startup-taint"


def patch_as(plane: ControlPlane, kubeconfig: Path, node: str, patch: list[dict[str, Any]]) -> str:
    """The JSON patch of the node by the kubeconfig's user: '' if admitted, else the error."""
    completed = subprocess.run(
        [
            str(plane.binaries.kubectl),
            f"--kubeconfig={kubeconfig}",
            *("patch", "node", node, "--type=json", "-p", json.dumps(patch)),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return "" if completed.returncode == 0 else completed.stderr or "refused"


FROZEN_FIELD_CHANGES: dict[str, dict[str, Any]] = {
    "a label": {"op": "add", "path": "/metadata/labels/x", "value": "y"},
    "an annotation": {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}},
    "a finalizer": {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]},
    "cordon": {"op": "add", "path": "/spec/unschedulable", "value": True},
    "the provider ID": {"op": "add", "path": "/spec/providerID", "value": "aws:///x/i-0"},
    "the pod CIDR": {"op": "add", "path": "/spec/podCIDR", "value": "10.244.0.0/24"},
}


def remove_startup_taint(plane: ControlPlane, node: str) -> list[dict[str, Any]]:
    index = taint_keys(plane, node).index(STARTUP_TAINT)
    return [{"op": "remove", "path": f"/spec/taints/{index}"}]


def test_the_policy_lets_a_pods_token_remove_only_its_own_nodes_startup_taint(
    upf_node: UpfNode,
    cluster_box: ControlPlane,
    tmp_path: Path,
    five_g_core_applied: dict[str, Any],
) -> None:
    other = UpfNode(cluster_box, five_g_core_applied, f"{upf_node.name}-b", tmp_path / "b")
    try:
        pod = upf_node.pod()
        assert pod is not None
        bound = token_kubeconfig(cluster_box, pod_token(cluster_box, pod), tmp_path / "bound")
        unbound_token = cluster_box.kubectl("create", "token", "cleartaints", "-n", "cleartaints")
        unbound = token_kubeconfig(cluster_box, unbound_token.strip(), tmp_path / "unbound")
        node = upf_node.name
        pool_taint = next(k for k in taint_keys(cluster_box, node) if k != STARTUP_TAINT)
        other_index = taint_keys(cluster_box, node).index(pool_taint)
        denied: dict[str, tuple[Path, str, list[dict[str, Any]]]] = {
            "another node's taint": (
                bound,
                other.name,
                remove_startup_taint(cluster_box, other.name),
            ),
            "a token without its pod": (unbound, node, remove_startup_taint(cluster_box, node)),
            "the pool's taint": (
                bound,
                node,
                [{"op": "remove", "path": f"/spec/taints/{other_index}"}],
            ),
            **{
                # every other field an update of the node could change (the policy freezes
                # them: charts/cleartaints.py, _FROZEN_NODE_FIELDS), set along with removing
                # the startup taint
                what: (bound, node, [*remove_startup_taint(cluster_box, node), change])
                for what, change in FROZEN_FIELD_CHANGES.items()
            },
        }
        # each refused by the policy itself (its name is in the denial), not by anything else
        refusals = {what: patch_as(cluster_box, *case) for what, case in denied.items()}
        assert {what: POLICY in error for what, error in refusals.items()} == dict.fromkeys(
            denied, True
        ), refusals
        assert patch_as(cluster_box, bound, node, remove_startup_taint(cluster_box, node)) == ""
        assert STARTUP_TAINT not in taint_keys(cluster_box, node)
        assert STARTUP_TAINT in taint_keys(cluster_box, other.name)
    finally:
        cluster_box.kubectl("delete", "node", other.name, "--wait=false")
