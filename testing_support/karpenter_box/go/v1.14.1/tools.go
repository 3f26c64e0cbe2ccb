//go:build tools

// Package karpenter pins the Karpenter controller the Karpenter box runs: the AWS provider's
// cmd/controller at the version config/karpenter_releases.py makes the default.
package karpenter

import (
	_ "github.com/aws/karpenter-provider-aws/cmd/controller"
)
