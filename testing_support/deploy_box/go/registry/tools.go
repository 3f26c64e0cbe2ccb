//go:build tools

// Package tools pins the registry of github.com/distribution/distribution (CNCF Distribution,
// the OCI registry), whose cmd/registry the deploy box serves the Karpenter charts from.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
