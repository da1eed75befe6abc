//go:build !failpoints

package main

import (
	"flag"

	"github.com/sluice-rl/sluice/internal/failpoint"
)

// failpointsFlag defines nothing: a binary not built with -tags failpoints
// has no faults to arm.
func failpointsFlag(*flag.FlagSet, **failpoint.Points) {}
