//go:build tools

// Package kubernetes pins the control plane the cluster box builds: k8s.io/kubernetes replaces
// its staging modules with ./staging in its own go.mod, which a dependent module cannot follow,
// so go.mod replaces each with its published v0.<minor>.<patch> release.
package kubernetes

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
