"""The deploy box: aws-cdk's kubectl handler, from the synthesized assets and unchanged, fed
CloudFormation's Create, Update (with OldResourceProperties) and Delete events for the kubectl
provider's resources of a cluster template (Custom::AWSCDK-EKS-KubernetesResource, -HelmChart,
-KubernetesPatch) in the order model's order (stack.py), against the cluster box's control plane,
with kubectl and helm of the lambda-layer-kubectl package on PATH (handler.py). The Karpenter
charts come from a real OCI registry on loopback reached as public.ecr.aws (registry.py); the
system node group's nodes and the kubelet's part for pods are played (nodes.py), so helm's
--wait sees the controller's Deployment become available.

The one deviation from Lambda: `aws` on the handler's PATH is a stand-in (handler.py,
write_aws_stand_in): its `aws eks update-kubeconfig` (the handler's log-in) writes the box's
kubeconfig, its `aws ecr-public get-login-password` prints a password the loopback registry
accepts. inventory.py says what is in the cluster and what the templates say should be.
"""
