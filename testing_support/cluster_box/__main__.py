"""`python -m testing_support.cluster_box` (make cluster-box CONFIG=... CMD="..."): build the box
if needed, synthesize the app of CONFIG (a config file; the default app without one), start the
Karpenter box for it (testing_support/karpenter_box: the control plane, the app's objects, the
EC2 emulator with the app's network, the real Karpenter at the config's karpenter.version), run
CMD through the shell, stop the box, and exit with CMD's code.

CMD runs with KUBECONFIG (the box's admin), the box's kubectl and the project's .venv/bin first
on PATH, and the AWS settings that reach the box's emulator as the controller does:
AWS_ENDPOINT_URL (moto_server: every service, EC2 included), AWS_ENDPOINT_URL_EC2 (the
emulator's recording proxy in front of it), AWS_ENDPOINT_URL_SSM (the AMI alias's public
parameters), AWS_REGION and the credentials the proxy checks signatures against."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from testing_support.cluster_box.build import BuildError
from testing_support.deploy_box.command import deploy_then_update
from testing_support.karpenter_box.app_world import synthesize_app
from testing_support.karpenter_box.box import running_karpenter_box

COMMAND_ENV = "CLUSTER_BOX_CMD"
CONFIG_ENV = "CLUSTER_BOX_CONFIG"
THEN_ENV = "CLUSTER_BOX_THEN"
REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    command = " ".join(argv) or os.environ.get(COMMAND_ENV, "")
    if not command:
        print("usage: make cluster-box [CONFIG=examples/5g-core.json] CMD='kubectl get nodeclaims'",
              file=sys.stderr)  # fmt: skip
        return 2
    config_file = os.environ.get(CONFIG_ENV, "")
    then_file = os.environ.get(THEN_ENV, "")
    with tempfile.TemporaryDirectory(prefix="cluster-box-") as directory:
        work = Path(directory)
        try:
            if then_file:
                return deploy_then_update(REPO, work, config_file or None, then_file, command)
            app = synthesize_app(REPO, work / "cdk.out", config_file or None)
            with running_karpenter_box(work, app) as box:
                print(f"cluster-box: API server {box.plane.server}; Karpenter "
                      f"{box.karpenter.version} ({box.log})", file=sys.stderr)  # fmt: skip
                environment = {
                    **box.plane.environment(),
                    **box.aws_environment(),
                }
                environment["PATH"] = os.pathsep.join(
                    (str(box.plane.binaries.kubectl.parent), str(REPO / ".venv" / "bin"),
                     os.environ.get("PATH", ""))
                )  # fmt: skip
                return subprocess.run(command, shell=True, env=environment, check=False).returncode
        except BuildError as error:
            print(f"cluster-box: {error}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
