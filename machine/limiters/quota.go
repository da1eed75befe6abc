package limiters

import (
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
)

func (r *Room) quotaCommands() []room.Command[Exec] {
	key := []cmdspec.Arg{{Name: "key", Type: "key"}}
	return []room.Command[Exec]{
		{Spec: cmdspec.Spec{Name: "quota.check", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Counts units against a calendar-period quota (optionally renewing on a billing anniversary): " +
				"replies [limited, limit, remaining, retry_after, reset_after].",
			Args: []cmdspec.Arg{
				{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"},
				{Name: "period", Type: "oneof", Sub: []cmdspec.Arg{
					{Name: "hour", Type: "pure-token", Token: "HOUR"},
					{Name: "day", Type: "pure-token", Token: "DAY"},
					{Name: "week", Type: "pure-token", Token: "WEEK"},
					{Name: "month", Type: "pure-token", Token: "MONTH"},
					{Name: "year", Type: "pure-token", Token: "YEAR"},
				}},
				{Name: "anchor", Type: "integer", Token: "ANCHOR", Optional: true},
				{Name: "tz", Type: "string", Token: "TZ", Optional: true},
				{Name: "cost", Type: "integer", Token: "COST", Optional: true},
			}}, Decides: true, Run: r.runQuotaCheck, Journaled: true,
			Check: func(args [][]byte) string { _, bad := r.parseQuotaCheck(args); return bad }},
		{Spec: cmdspec.Spec{Name: "quota.get", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns a quota's [used, period_start, period_end, limit, remaining] without consuming (nil if the key does not exist).",
			Args:    key}, Run: r.runQuotaGet},
		{Spec: cmdspec.Spec{Name: "quota.refund", Arity: 3, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Gives units back to the current period (never below 0); replies like QUOTA.GET.",
			Args:    []cmdspec.Arg{{Name: "key", Type: "key"}, {Name: "units", Type: "integer"}}}, Run: r.runQuotaRefund, Journaled: true,
			Check: func(args [][]byte) string { _, bad := parseUnits(args[2]); return bad }},
		{Spec: cmdspec.Spec{Name: "quota.reset", Arity: 2, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Zeroes the current period's usage; replies like QUOTA.GET.",
			Args:    key}, Run: r.runQuotaReset, Journaled: true},
	}
}

// quotaRequest is a parsed QUOTA.CHECK.
type quotaRequest struct {
	limit, cost int64
	sch         quota.Schedule
}

// parseQuotaCheck reads <key> <limit> <period> [ANCHOR <unix-s>] [TZ
// <zone>] [COST <n>]; it returns the error reply, or "".
func (r *Room) parseQuotaCheck(args [][]byte) (quotaRequest, string) {
	limit, ok := resp.ParseInt(args[2])
	if !ok {
		return quotaRequest{}, resp.ErrNotInteger
	}
	if limit < 0 {
		return quotaRequest{}, "ERR limit must not be negative"
	}
	var anchorArg, zoneArg, costArg []byte
	for i := 4; i < len(args); i += 2 {
		var opt *[]byte
		switch {
		case resp.EqualFold(args[i], "anchor"):
			opt = &anchorArg
		case resp.EqualFold(args[i], "tz"):
			opt = &zoneArg
		case resp.EqualFold(args[i], "cost"):
			opt = &costArg
		}
		if opt == nil || *opt != nil || i+1 >= len(args) {
			return quotaRequest{}, resp.ErrSyntax
		}
		*opt = args[i+1]
	}
	cost := int64(1)
	if costArg != nil {
		if cost, ok = resp.ParseInt(costArg); !ok {
			return quotaRequest{}, resp.ErrNotInteger
		}
		if cost < 0 {
			return quotaRequest{}, "ERR COST must not be negative"
		}
	}
	sch, bad := r.QuotaSchedule(args[3], anchorArg, zoneArg)
	return quotaRequest{limit: limit, cost: cost, sch: sch}, bad
}

// runQuotaCheck is QUOTA.CHECK <key> <limit> <period> [ANCHOR <unix-s>]
// [TZ <zone>] [COST <n>].
func (r *Room) runQuotaCheck(x Exec, args [][]byte) {
	req, bad := r.parseQuotaCheck(args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	limit, cost, sch := req.limit, req.cost, req.sch

	key := args[1]
	s, now := x.LockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	if err != nil {
		x.Unlock(s)
		x.Error(err)
		return
	}
	var old quota.State
	if found {
		if old, err = r.QuotaAt(s, e); err != nil {
			x.Unlock(s)
			x.Error(err)
			return
		}
	}
	next := &x.Scratch().Quota
	var store bool
	var res limiter.Result
	*next, store, res, err = quota.Check(old, found, now, limit, sch, cost)
	if err == nil && store {
		if err = StoreQuota(s, key, e, found, next); err == nil {
			x.QuotaChanged(key, next)
		}
	}
	x.Unlock(s)
	if err != nil {
		quotaFail(x, err)
		return
	}
	x.Limiter(res)
}

// QuotaSchedule builds the calendar schedule QUOTA.CHECK and RL.CHECKALL
// take: a period, an optional ANCHOR (Unix seconds) and TZ (an IANA zone
// from the tz database compiled in; UTC when absent). It returns the error
// reply, or "".
func (r *Room) QuotaSchedule(periodArg, anchorArg, zoneArg []byte) (quota.Schedule, string) {
	period, err := quota.ParsePeriod(string(periodArg))
	if err != nil {
		return quota.Schedule{}, room.ErrorReply(err)
	}
	var anchor int64
	if anchorArg != nil {
		sec, ok := resp.ParseInt(anchorArg)
		if !ok {
			return quota.Schedule{}, resp.ErrNotInteger
		}
		if sec < 0 {
			return quota.Schedule{}, "ERR ANCHOR must not be negative"
		}
		if anchor, err = quota.AnchorFromSeconds(sec); err != nil {
			return quota.Schedule{}, "ERR ANCHOR is out of range (at most " + strconv.FormatInt(quota.MaxInstant/1e9, 10) + ")"
		}
	}
	if zoneArg == nil {
		zoneArg = []byte(defaultZone)
	}
	loc, err := r.zones.loadBytes(zoneArg)
	if err != nil {
		return quota.Schedule{}, room.ErrorReply(err)
	}
	sch, err := quota.NewScheduleIn(period, anchor, anchorArg != nil, loc)
	if err != nil {
		return quota.Schedule{}, room.ErrorReply(err)
	}
	return sch, ""
}

// quotaChange is what QUOTA.REFUND and QUOTA.RESET do to a stored state.
type quotaChange func(st *quota.State, now int64) (quota.Usage, error)

// runQuotaGet is QUOTA.GET <key>. It reports the period containing now
// (rolled over if the stored one has ended) without changing the key.
func (r *Room) runQuotaGet(x Exec, args [][]byte) {
	key := args[1]
	s, now := x.LockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	var st quota.State
	if found {
		st, err = r.QuotaAt(s, e)
	}
	x.Unlock(s)
	if err != nil || !found {
		replyUsage(x, quota.Usage{}, false, err)
		return
	}
	u, err := st.Get(now)
	replyUsage(x, u, true, err)
}

// parseUnits reads QUOTA.REFUND's <units>: the count, or the error reply.
func parseUnits(arg []byte) (int64, string) {
	n, ok := resp.ParseInt(arg)
	if !ok {
		return 0, resp.ErrNotInteger
	}
	if n < 0 {
		return 0, "ERR units must not be negative"
	}
	return n, ""
}

// runQuotaRefund is QUOTA.REFUND <key> <units>.
func (r *Room) runQuotaRefund(x Exec, args [][]byte) {
	n, bad := parseUnits(args[2])
	if bad != "" {
		x.Fail(bad)
		return
	}
	r.changeQuota(x, args[1], func(st *quota.State, now int64) (quota.Usage, error) { return st.Refund(now, n) })
}

// runQuotaReset is QUOTA.RESET <key>.
func (r *Room) runQuotaReset(x Exec, args [][]byte) {
	r.changeQuota(x, args[1], (*quota.State).Reset)
}

// changeQuota applies change to key's state under its slot lock, moves the
// key's expiry to the changed state's and journals it. A missing key is
// left missing: without a schedule there is no period to change.
func (r *Room) changeQuota(x Exec, key []byte, change quotaChange) {
	s, now := x.LockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	if err != nil || !found {
		x.Unlock(s)
		replyUsage(x, quota.Usage{}, false, err)
		return
	}
	next := &x.Scratch().Quota
	if *next, err = r.QuotaAt(s, e); err != nil {
		x.Unlock(s)
		x.Error(err)
		return
	}
	u, err := change(next, now)
	if err == nil {
		if err = StoreQuota(s, key, e, true, next); err == nil {
			x.QuotaChanged(key, next)
		}
	}
	x.Unlock(s)
	replyUsage(x, u, true, err)
}

// quotaError is errorReply for the quota package's wrapped errors
// ("check: quota: instant out of supported range"): the sentinel's text.
// quotaFail answers a quota command's error, and why.
func quotaFail(x Exec, err error) {
	why := room.ReasonInvalid
	switch {
	case errors.Is(err, keyspace.ErrWrongType):
		why = room.ReasonWrongType
	case errors.Is(err, quota.ErrCorrupt):
		why = room.ReasonInternal
	}
	x.FailFor(why, quotaError(err))
}

func quotaError(err error) string {
	return strings.Replace(room.ErrorReply(err), "ERR quota: ", "ERR ", 1)
}

// defaultZone is the zone of a QUOTA.CHECK without TZ.
const defaultZone = "UTC"

// QuotaAt decodes the state of quota key e (under its slot lock) from its
// record, without allocating.
func (r *Room) QuotaAt(s *keyspace.Slot, e keyspace.Entry) (quota.State, error) {
	if !e.Inline() {
		return quota.State{}, quota.ErrCorrupt
	}
	return quota.DecodeRecord(s.State(e), r.zones.load)
}

// maxInlineQuota bounds a quota's record encoding: a flag byte and six
// varints.
const maxInlineQuota = 1 + 6*10

// StoreQuota writes quota key's state into its record: in place when e
// (found) is its record, else as a new record. Entries of the slot other
// than e stay valid.
func StoreQuota(s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, st *quota.State) error {
	var buf [maxInlineQuota]byte
	enc, err := st.AppendRecord(buf[:0])
	if err != nil {
		return err
	}
	if !found {
		_, err := s.InsertState(key, keyspace.KindQuota, st.ExpireAt(), enc)
		return err
	}
	if !e.Inline() {
		return quota.ErrCorrupt
	}
	e, err = s.SetState(e, enc)
	if err != nil {
		return err
	}
	s.SetWord(e, st.ExpireAt())
	return nil
}

// replyUsage answers QUOTA.GET, REFUND and RESET: [used, period_start,
// period_end, limit, remaining] with the bounds in Unix seconds, or nil
// for a missing key.
func replyUsage(x Exec, u quota.Usage, found bool, err error) {
	switch {
	case err != nil:
		quotaFail(x, err)
	case !found:
		x.Reply().NullArray()
	default:
		x.Reply().Array(5)
		x.Reply().Int(u.Used)
		x.Reply().Int(floorSeconds(u.Start))
		x.Reply().Int(floorSeconds(u.End))
		x.Reply().Int(u.Limit)
		x.Reply().Int(u.Remaining)
	}
}

// floorSeconds is ns in whole seconds, rounded down. Period bounds are
// whole seconds anyway: zone offsets and anchors are.
func floorSeconds(ns int64) int64 {
	s := ns / 1e9
	if ns%1e9 < 0 {
		s--
	}
	return s
}
