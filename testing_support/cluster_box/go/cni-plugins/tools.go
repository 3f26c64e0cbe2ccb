//go:build tools

// Package cniplugins pins the reference CNI plugins the cluster box builds, at the release the
// AWS VPC CNI ships in its image (its own module: its dependencies' versions differ from the
// control plane's).
package cniplugins

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/ipam/static"
	_ "github.com/containernetworking/plugins/plugins/main/host-device"
	_ "github.com/containernetworking/plugins/plugins/main/ipvlan"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/main/macvlan"
	_ "github.com/containernetworking/plugins/plugins/meta/sbr"
	_ "github.com/containernetworking/plugins/plugins/meta/tuning"
)
