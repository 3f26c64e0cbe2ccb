// cron_probe reads budget schedules, one JSON string per line on stdin, and answers each with a
// JSON line: what robfig/cron v3.0.1 makes of it as Karpenter v1.14.1 parses it
// (sigs.k8s.io/karpenter pkg/apis/v1/nodepool.go, Budget.IsActive:
// cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", schedule))), whether the NodePool CRD's pattern
// matches it with Go's regexp (as the API server matches it), whether it fires, and the longest
// time between two hits over 28 years from 2026 (one cycle of weekdays and leap days).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/robfig/cron/v3"
)

// The pattern of spec.disruption.budgets[].schedule in karpenter.sh_nodepools.yaml (v1.14.1).
var crdPattern = regexp.MustCompile(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`)

// Hits walked at most per schedule: a dense schedule stops early (complete is then false).
const maxHits = 300000

type answer struct {
	Error      string `json:"error"`
	Every      bool   `json:"every"`
	CRD        bool   `json:"crd"`
	Fires      bool   `json:"fires"`
	GapMinutes int64  `json:"gap_minutes"`
	Complete   bool   `json:"complete"`
}

func probe(schedule string) answer {
	result := answer{CRD: crdPattern.MatchString(schedule)}
	parsed, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", schedule))
	if err != nil {
		result.Error = err.Error()
		return result
	}
	if _, every := parsed.(cron.ConstantDelaySchedule); every {
		result.Every = true
		return result
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(28, 0, 0)
	previous := parsed.Next(start.Add(-time.Second))
	result.Fires = !previous.IsZero()
	if !result.Fires {
		return result
	}
	for hits := 0; hits < maxHits; hits++ {
		next := parsed.Next(previous)
		if next.IsZero() {
			return result
		}
		if gap := int64(next.Sub(previous) / time.Minute); gap > result.GapMinutes {
			result.GapMinutes = gap
		}
		if !next.Before(end) {
			result.Complete = true
			return result
		}
		previous = next
	}
	return result
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		var schedule string
		if err := json.Unmarshal(scanner.Bytes(), &schedule); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := out.Encode(probe(schedule)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}
