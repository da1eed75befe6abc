package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/crossgroup"
)

// A check or reserve across groups whose outcome is unknown is answered
// so even when the error also names a group without a leader (the head of
// a reservation not kept while its parts hold their charge): never
// CLUSTERDOWN, which says nothing was applied. A group without a leader
// alone is CLUSTERDOWN.
func TestAcrossFailedUnknownIsNeverClusterDown(t *testing.T) {
	c := testCtx(testEnv())
	args := [][]byte{[]byte("RL.RESERVE"), []byte("d"), []byte("id")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: the head was not kept: %w", crossgroup.ErrOutcomeUnknown, fmt.Errorf("group g1: %w", crossgroup.ErrNoLeader)), "-ERR the outcome is unknown"},
		{fmt.Errorf("%w: %w", crossgroup.ErrOutcomeUnknown, errors.Join(crossgroup.ErrNoLeader, errors.New("no cancel confirmed"))), "-ERR the outcome is unknown"},
		{fmt.Errorf("group g2: %w", crossgroup.ErrNoLeader), "-CLUSTERDOWN"},
		{fmt.Errorf("%w: group g2: %w", crossgroup.ErrSettledInPart, crossgroup.ErrNoLeader), "-ERR the reservation was settled in part"},
	} {
		if got := string(c.acrossFailed(nil, args, tc.err)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want %s…", tc.err, got, tc.want)
		}
	}
}
