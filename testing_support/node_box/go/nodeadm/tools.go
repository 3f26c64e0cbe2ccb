//go:build tools

// Package nodeadm pins the nodeadm the node box installs: Amazon Linux 2023's node
// initialization tool from github.com/awslabs/amazon-eks-ami. The module has no release tags;
// the Go module proxy serves one pseudo-version of it (see the README beside the box).
package nodeadm

import _ "github.com/awslabs/amazon-eks-ami/nodeadm/cmd/nodeadm"
