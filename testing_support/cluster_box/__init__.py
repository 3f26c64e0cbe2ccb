"""The cluster box: a real Kubernetes control plane on 127.0.0.1 for tests and by hand.

kube-apiserver, kube-controller-manager and kube-scheduler built from k8s.io/kubernetes at the
minor of the config's default cluster.kubernetes_version, and etcd 3.6, from the Go module
proxy by the versions pinned in go/*/go.mod (and go.sum), cached on the machine outside the clone
(build.py). TLS, service-account keys, Node and RBAC authorization and the default admission
plugins (ServiceAccount among them), as EKS runs them (control_plane.py). No kubelet: a test
registers Node objects as Karpenter would and plays kubelet for the pods it needs.

`make cluster-box CMD="..."` runs CMD with KUBECONFIG set and the box's kubectl on PATH
(__main__.py); tests use the session fixture `cluster_box` (tests/cluster_box/conftest.py).
"""
