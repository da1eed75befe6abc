package persist

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sluice-rl/sluice/keyspace"
)

// Under every policy, a crash right after a completed SAVE keeps every
// quota change the snapshot holds: the snapshot is only complete once the
// quota store has them on disk (startup prefers the store's copy). With
// FsyncNo the store used to lose them, and the quota with them.
func TestCrashAfterSaveKeepsTheSnapshotsQuotas(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(policy.String(), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			clk := newClock(t0)
			ks := keyspace.New()
			st := openStore(t, fs, policy, ks, clk)
			for i := range 5 {
				q := quotaState(t, clk.Now(), 100, int64(i+1), "UTC")
				st.QuotaChanged([]byte("acct"), q)
				put(t, ks, "acct", keyspace.KindQuota, q.ExpireAt(), q)
			}
			mustOK(t, st.Save())
			want := dump(t, ks, clk.Now())
			crashed := fs.CrashClone(vfs.CrashCloneCfg{}) // what was synced, and nothing else
			st.Close()

			ks2 := keyspace.New()
			st2 := openStore(t, crashed, policy, ks2, clk)
			defer st2.Close()
			sameKeys(t, dump(t, ks2, clk.Now()), want)
		})
	}
}
