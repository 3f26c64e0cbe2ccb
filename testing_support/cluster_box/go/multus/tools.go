//go:build tools

// Package multus pins the Multus thick plugin the cluster box builds: the daemon and the shim
// the node's CNI configuration calls (its own module: its dependencies' versions differ from the
// control plane's).
package multus

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-daemon"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-shim"
)
