//go:build tools

// Package promtool pins the promtool the alert tests build: Prometheus' own checker and unit
// tester of rule files, from the Prometheus module at the version go.mod requires.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
