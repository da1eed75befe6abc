//go:build failpoints

package main

import (
	"flag"

	"github.com/sluice-rl/sluice/internal/failpoint"
)

// failpointsFlag defines --failpoints, in a binary built with -tags
// failpoints only (the robustness suite's): the faults to arm, as
// failpoint.Parse reads them.
func failpointsFlag(fs *flag.FlagSet, dst **failpoint.Points) {
	fs.Func("failpoints", "faults to inject (robustness suite builds only): name=crash|crash-after-<d>|error|sleep-<d>[@chance],…", func(v string) error {
		p, err := failpoint.Parse(v)
		if err == nil {
			*dst = p
		}
		return err
	})
}
