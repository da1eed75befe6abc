package machine

import (
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/quota"
	"github.com/sluice-rl/sluice/resp"
)

func quotaCommands() []*Command {
	key := []Arg{{Name: "key", Type: "key"}}
	return []*Command{
		{Spec: cmdspec.Spec{Name: "quota.check", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Counts units against a calendar-period quota (optionally renewing on a billing anniversary): " +
				"replies [limited, limit, remaining, retry_after, reset_after].",
			Args: []Arg{
				{Name: "key", Type: "key"},
				{Name: "limit", Type: "integer"},
				{Name: "period", Type: "oneof", Sub: []Arg{
					{Name: "hour", Type: "pure-token", Token: "HOUR"},
					{Name: "day", Type: "pure-token", Token: "DAY"},
					{Name: "week", Type: "pure-token", Token: "WEEK"},
					{Name: "month", Type: "pure-token", Token: "MONTH"},
					{Name: "year", Type: "pure-token", Token: "YEAR"},
				}},
				{Name: "anchor", Type: "integer", Token: "ANCHOR", Optional: true},
				{Name: "tz", Type: "string", Token: "TZ", Optional: true},
				{Name: "cost", Type: "integer", Token: "COST", Optional: true},
			}}, Decides: true, run: runQuotaCheck, Journaled: true,
			check: func(m *Machine, args [][]byte) string { _, bad := m.parseQuotaCheck(args); return bad }},
		{Spec: cmdspec.Spec{Name: "quota.get", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Returns a quota's [used, period_start, period_end, limit, remaining] without consuming (nil if the key does not exist).",
			Args:    key}, run: runQuotaGet},
		{Spec: cmdspec.Spec{Name: "quota.refund", Arity: 3, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Gives units back to the current period (never below 0); replies like QUOTA.GET.",
			Args:    []Arg{{Name: "key", Type: "key"}, {Name: "units", Type: "integer"}}}, run: runQuotaRefund, Journaled: true,
			check: func(_ *Machine, args [][]byte) string { _, bad := parseUnits(args[2]); return bad }},
		{Spec: cmdspec.Spec{Name: "quota.reset", Arity: 2, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: 1, Step: 1, Group: "sluice", Since: "1.0.0", Complexity: "O(1)",
			Summary: "Zeroes the current period's usage; replies like QUOTA.GET.",
			Args:    key}, run: runQuotaReset, Journaled: true},
	}
}

// quotaRequest is a parsed QUOTA.CHECK.
type quotaRequest struct {
	limit, cost int64
	sch         quota.Schedule
}

// parseQuotaCheck reads <key> <limit> <period> [ANCHOR <unix-s>] [TZ
// <zone>] [COST <n>]; it returns the error reply, or "".
func (m *Machine) parseQuotaCheck(args [][]byte) (quotaRequest, string) {
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
	sch, bad := m.quotaSchedule(args[3], anchorArg, zoneArg)
	return quotaRequest{limit: limit, cost: cost, sch: sch}, bad
}

// runQuotaCheck is QUOTA.CHECK <key> <limit> <period> [ANCHOR <unix-s>]
// [TZ <zone>] [COST <n>].
func runQuotaCheck(x *exec, args [][]byte) {
	req, bad := x.m.parseQuotaCheck(args)
	if bad != "" {
		x.fail(bad)
		return
	}
	limit, cost, sch := req.limit, req.cost, req.sch

	key := args[1]
	s, now := x.lockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	if err != nil {
		x.unlock(s)
		x.error(err)
		return
	}
	var old quota.State
	if found {
		if old, err = x.m.quotaAt(s, e); err != nil {
			x.unlock(s)
			x.error(err)
			return
		}
	}
	next := &x.quota
	var store bool
	var res limiter.Result
	*next, store, res, err = quota.Check(old, found, now, limit, sch, cost)
	var t Ticket
	if err == nil && store {
		if err = storeQuota(s, key, e, found, next); err == nil {
			t = x.m.quotaChanged(key, next)
		}
	}
	x.unlock(s)
	if err != nil {
		x.quotaFail(err)
		return
	}
	x.journaled(t)
	x.limiter(res)
}

// quotaSchedule builds the calendar schedule QUOTA.CHECK and RL.CHECKALL
// take: a period, an optional ANCHOR (Unix seconds) and TZ (an IANA zone
// from the tz database compiled in; UTC when absent). It returns the error
// reply, or "".
func (m *Machine) quotaSchedule(periodArg, anchorArg, zoneArg []byte) (quota.Schedule, string) {
	period, err := quota.ParsePeriod(string(periodArg))
	if err != nil {
		return quota.Schedule{}, ErrorReply(err)
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
	loc, err := m.zones.loadBytes(zoneArg)
	if err != nil {
		return quota.Schedule{}, ErrorReply(err)
	}
	sch, err := quota.NewScheduleIn(period, anchor, anchorArg != nil, loc)
	if err != nil {
		return quota.Schedule{}, ErrorReply(err)
	}
	return sch, ""
}

// quotaChange is what QUOTA.REFUND and QUOTA.RESET do to a stored state.
type quotaChange func(st *quota.State, now int64) (quota.Usage, error)

// runQuotaGet is QUOTA.GET <key>. It reports the period containing now
// (rolled over if the stored one has ended) without changing the key.
func runQuotaGet(x *exec, args [][]byte) {
	key := args[1]
	s, now := x.lockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	var st quota.State
	if found {
		st, err = x.m.quotaAt(s, e)
	}
	x.unlock(s)
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
func runQuotaRefund(x *exec, args [][]byte) {
	n, bad := parseUnits(args[2])
	if bad != "" {
		x.fail(bad)
		return
	}
	changeQuota(x, args[1], func(st *quota.State, now int64) (quota.Usage, error) { return st.Refund(now, n) })
}

// runQuotaReset is QUOTA.RESET <key>.
func runQuotaReset(x *exec, args [][]byte) {
	changeQuota(x, args[1], (*quota.State).Reset)
}

// changeQuota applies change to key's state under its slot lock, moves the
// key's expiry to the changed state's and journals it. A missing key is
// left missing: without a schedule there is no period to change.
func changeQuota(x *exec, key []byte, change quotaChange) {
	s, now := x.lockKey(key)
	e, found, err := s.GetKind(key, keyspace.KindQuota, now)
	if err != nil || !found {
		x.unlock(s)
		replyUsage(x, quota.Usage{}, false, err)
		return
	}
	next := &x.quota
	if *next, err = x.m.quotaAt(s, e); err != nil {
		x.unlock(s)
		x.error(err)
		return
	}
	u, err := change(next, now)
	var t Ticket
	if err == nil {
		if err = storeQuota(s, key, e, true, next); err == nil {
			t = x.m.quotaChanged(key, next)
		}
	}
	x.unlock(s)
	x.journaled(t)
	replyUsage(x, u, true, err)
}

// quotaError is errorReply for the quota package's wrapped errors
// ("check: quota: instant out of supported range"): the sentinel's text.
// quotaFail answers a quota command's error, and why.
func (x *exec) quotaFail(err error) {
	why := ReasonInvalid
	switch {
	case errors.Is(err, keyspace.ErrWrongType):
		why = ReasonWrongType
	case errors.Is(err, quota.ErrCorrupt):
		why = ReasonInternal
	}
	x.failFor(why, quotaError(err))
}

func quotaError(err error) string {
	return strings.Replace(ErrorReply(err), "ERR quota: ", "ERR ", 1)
}

// defaultZone is the zone of a QUOTA.CHECK without TZ.
const defaultZone = "UTC"

// quotaAt decodes the state of quota key e (under its slot lock) from its
// record, without allocating.
func (m *Machine) quotaAt(s *keyspace.Slot, e keyspace.Entry) (quota.State, error) {
	if !e.Inline() {
		return quota.State{}, quota.ErrCorrupt
	}
	return quota.DecodeRecord(s.State(e), m.zones.load)
}

// maxInlineQuota bounds a quota's record encoding: a flag byte and six
// varints.
const maxInlineQuota = 1 + 6*10

// storeQuota writes quota key's state into its record: in place when e
// (found) is its record, else as a new record. Entries of the slot other
// than e stay valid.
func storeQuota(s *keyspace.Slot, key []byte, e keyspace.Entry, found bool, st *quota.State) error {
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
func replyUsage(x *exec, u quota.Usage, found bool, err error) {
	switch {
	case err != nil:
		x.quotaFail(err)
	case !found:
		x.w.NullArray()
	default:
		x.w.Array(5)
		x.w.Int(u.Used)
		x.w.Int(floorSeconds(u.Start))
		x.w.Int(floorSeconds(u.End))
		x.w.Int(u.Limit)
		x.w.Int(u.Remaining)
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
