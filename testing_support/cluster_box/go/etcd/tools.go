//go:build tools

// Package etcd pins the etcd server the cluster box builds (its own module: its dependencies'
// versions differ from the control plane's).
package etcd

import _ "go.etcd.io/etcd/server/v3"
