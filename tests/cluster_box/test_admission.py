"""Every object the app applies, for the default app and every example, accepted by a real API
server: the CRDs' schemas and CEL rules (Karpenter's of the pinned chart, Whereabouts', the NAD
CRD), built-in validation, the ValidatingAdmissionPolicy of cleartaints, server-side apply."""

from __future__ import annotations

import pytest

from testing_support.cluster_box.control_plane import ControlPlane
from tests.cluster_box.objects import apply_app, manifests_in_order
from tests.conftest import APP_FIXTURES, SynthesizedApp

pytestmark = pytest.mark.cluster_box

# The examples' apps and the default (the feature configs add nothing the API server checks
# differently: routes and rules are CloudFormation's).
APPS = [
    fixture for fixture in APP_FIXTURES if fixture not in ("routes_app", "per_network_rules_app")
]


@pytest.mark.parametrize("fixture", APPS)
def test_every_object_is_accepted_by_the_api_server(
    request: pytest.FixtureRequest, cluster_box: ControlPlane, fixture: str
) -> None:
    app: SynthesizedApp = request.getfixturevalue(fixture)
    template = app.template_json(app.stage.cluster)
    kinds = {o["kind"] for objects in manifests_in_order(template) for o in objects}
    assert {"NodePool", "EC2NodeClass", "DaemonSet", "NetworkAttachmentDefinition"} <= kinds
    apply_app(cluster_box, template, dry_run=True)
