//go:build tools

// Package whereabouts pins the Whereabouts IPAM plugin and its IP control loop the cluster box
// builds (its own module: its dependencies' versions differ from the control plane's).
package whereabouts

import (
	_ "github.com/k8snetworkplumbingwg/whereabouts/cmd"
	_ "github.com/k8snetworkplumbingwg/whereabouts/cmd/controlloop"
)
