package decide

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/cmdspec"
	"github.com/sluice-rl/sluice/gcra"
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/resp"
	"github.com/sluice-rl/sluice/slot"
	"github.com/sluice-rl/sluice/window"
)

// The commands that change what RL.CHECK enforces: the rule set (loaded
// from files by the server, through the log like any change), per-
// descriptor overrides, and per-domain scale factors.

func (m *Room) policyAdminCommands() []room.Command[Exec] {
	return []room.Command[Exec]{{
		Spec: cmdspec.Spec{Name: "rl.rules", Arity: -2, Flags: []string{"write", "admin", "noscript"},
			Group: "sluice", Since: "1.1.0", Complexity: "O(N) where N is the size of the rules",
			Summary: "LOAD <name> <yaml> [<name> <yaml> ...] loads a client's files, replacing the domains they define (all files or none); LOAD-FILES (the server's --rules files) replaces the server's files, keeping clients' other domains; CLEAR [domain] drops all rules or one domain's; LIST [domain] lists the rules.",
			Args: []cmdspec.Arg{{Name: "subcommand", Type: "oneof", Sub: []cmdspec.Arg{
				{Name: "load", Type: "pure-token", Token: "LOAD"},
				{Name: "load-files", Type: "pure-token", Token: "LOAD-FILES"},
				{Name: "clear", Type: "pure-token", Token: "CLEAR"},
				{Name: "list", Type: "pure-token", Token: "LIST"},
			}}, {Name: "arg", Type: "string", Optional: true, Multiple: true}}}, Slots: rulesSlots, EveryGroup: true, Run: m.run(runRules), Check: m.check(checkRules), Subcommands: []string{"load", "load-files", "clear", "list"},
	}, {
		Spec: cmdspec.Spec{Name: "rl.override", Arity: -3, Flags: []string{"write", "denyoom"},
			FirstKey: 2, LastKey: 2, Step: 1, Group: "sluice", Since: "1.1.0", Complexity: "O(D) for SET and DEL; O(N) in the keys of the domain's slot for LIST",
			Summary: "SET <domain> <requests> <unit|seconds> [BURST n] [START unix] [UNTIL unix] DESCRIPTOR k v [k v ...] | DEL <domain> DESCRIPTOR k v [...] | LIST <domain>: per-descriptor limits set at run time.",
			Args: []cmdspec.Arg{
				{Name: "subcommand", Type: "oneof", Sub: []cmdspec.Arg{
					{Name: "set", Type: "pure-token", Token: "SET"},
					{Name: "del", Type: "pure-token", Token: "DEL"},
					{Name: "list", Type: "pure-token", Token: "LIST"},
				}},
				{Name: "domain", Type: "key"},
				{Name: "arg", Type: "string", Optional: true, Multiple: true},
			}}, EveryGroup: true, Stores: room.AlwaysStores, Journaled: true,
		Run: m.run(runOverride), Check: m.check(checkOverride), Subcommands: []string{"set", "del", "list"},
	}, {
		Spec: cmdspec.Spec{Name: "rl.scale", Arity: -3, Flags: []string{"write", "fast"},
			FirstKey: 2, LastKey: 2, Step: 1, Group: "sluice", Since: "1.1.0", Complexity: "O(1)",
			Summary: "SET <domain> <factor> [RECOVER seconds] scales a domain's limits by a factor in (0, 1] (raised factors recover linearly); GET <domain> replies [factor, target, ms to target].",
			Args: []cmdspec.Arg{
				{Name: "subcommand", Type: "oneof", Sub: []cmdspec.Arg{
					{Name: "set", Type: "pure-token", Token: "SET"},
					{Name: "get", Type: "pure-token", Token: "GET"},
				}},
				{Name: "domain", Type: "key"},
				{Name: "arg", Type: "string", Optional: true, Multiple: true},
			}}, EveryGroup: true, Journaled: true,
		Run: m.run(runScale), Check: m.check(checkScale), Subcommands: []string{"set", "get"},
	}}
}

// DefaultRecovery is how long a raised scale factor takes to reach its
// target when RL.SCALE SET names no RECOVER.
const DefaultRecovery = 60 * 1_000_000_000

// maxRecoverySeconds bounds RECOVER (a day).
const maxRecoverySeconds = 86400

// parseRulesLoad reads RL.RULES LOAD|LOAD-FILES <name> <yaml> [<name>
// <yaml> …] and parses the files on their own: the files, or the error
// reply. client marks them a client's.
func parseRulesLoad(args [][]byte, client bool) ([]RuleFile, *RulesState, string) {
	if len(args) < 4 || len(args)%2 != 0 {
		return nil, nil, "ERR RL.RULES " + strings.ToUpper(resp.Lower(args[1])) + " needs <name> <yaml> pairs"
	}
	files := make([]RuleFile, 0, (len(args)-2)/2)
	for i := 2; i < len(args); i += 2 {
		files = append(files, RuleFile{Name: string(args[i]), Source: bytes.Clone(args[i+1]), Client: client})
	}
	st, err := ParseRules(files)
	if err != nil {
		return nil, nil, "ERR rules not loaded: " + oneLine(err.Error())
	}
	return files, st, ""
}

// checkRules is RL.RULES without the state: the subcommand, its words,
// and for the loads the files themselves.
func checkRules(_ *Room, args [][]byte) string {
	switch {
	case resp.EqualFold(args[1], "load"), resp.EqualFold(args[1], "load-files"):
		_, _, bad := parseRulesLoad(args, false)
		return bad
	case resp.EqualFold(args[1], "clear"), resp.EqualFold(args[1], "list"):
		if len(args) > 3 {
			return resp.ErrSyntax
		}
	default:
		return "ERR unknown subcommand '" + resp.Clip(args[1], 64) + "'. Try LOAD, LOAD-FILES, CLEAR, LIST."
	}
	return ""
}

// runRules is RL.RULES:
//
//   - LOAD <name> <yaml> …: a client's files, merged by domain: each
//     replaces the domain it defines, whoever loaded it; other domains stay.
//   - LOAD-FILES <name> <yaml> …: the server's --rules files (the server
//     sends it at start, on SIGHUP and when a file changes): they replace
//     every earlier server file; a client's domains they do not define stay.
//   - CLEAR [domain]: drops every domain, or one; it stays so until the
//     server's files change or are reloaded.
//   - LIST [domain]: the rules in force.
func runRules(x *apply, args [][]byte) {
	if bad := checkRules(x.m, args); bad != "" {
		x.Fail(bad)
		return
	}
	cur := x.m.ruleState.Load()
	switch {
	case resp.EqualFold(args[1], "load"), resp.EqualFold(args[1], "load-files"):
		client := resp.EqualFold(args[1], "load")
		files, loaded, _ := parseRulesLoad(args, client)
		var digest [32]byte
		if cur != nil {
			digest = cur.FilesDigest
		}
		if !client {
			digest = FilesDigestOf(files)
		}
		// Keep the current files the load does not replace: for a client
		// load, those of other domains; for the server's, the clients'
		// files of other domains.
		var kept []RuleFile
		if cur != nil {
			for i, f := range cur.Files {
				if slices.Contains(loaded.Domains, cur.Domains[i]) || (!client && !f.Client) {
					continue
				}
				kept = append(kept, f)
			}
		}
		st := loaded
		if len(kept) > 0 {
			var err error
			if st, err = ParseRules(append(kept, files...)); err != nil {
				x.Fail("ERR rules not loaded: " + oneLine(err.Error()))
				return
			}
		}
		st.FilesDigest = digest
		x.setRules(st)
		x.w.OK()
	case resp.EqualFold(args[1], "clear"):
		var kept []RuleFile
		if cur != nil && len(args) == 3 {
			for i, f := range cur.Files {
				if cur.Domains[i] != string(args[2]) {
					kept = append(kept, f)
				}
			}
		}
		st, err := ParseRules(kept) // a subset of files that parsed together
		if err != nil {
			x.Error(err)
			return
		}
		if cur != nil {
			st.FilesDigest = cur.FilesDigest
		}
		x.setRules(st)
		x.w.OK()
	default:
		x.Instant()
		listRules(x, args[2:])
	}
}

// oneLine keeps an error on one RESP line.
func oneLine(s string) string {
	return string(bytes.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, []byte(s)))
}

// setRules stores st (nil: none) under RulesKey and makes it the set
// RL.CHECK uses.
func (x *apply) setRules(st *RulesState) {
	s, now := x.LockKey([]byte(RulesKey))
	defer x.Unlock(s)
	if e, ok := s.Get([]byte(RulesKey), now); ok {
		s.Delete(e)
	}
	if st != nil {
		if _, err := s.Insert([]byte(RulesKey), keyspace.KindRules, 0, st); err != nil {
			x.Error(err)
			return
		}
	}
	x.m.ruleState.Store(st)
}

// findPolicyRecords sets policyRecords if a restored state holds an
// override or a scale.
func (m *Room) findPolicyRecords() {
	if m.policyRecords.Load() {
		return
	}
	now := m.core.Applied()
	for i := range slot.Count {
		s := m.keys.Lock(i)
		if s.Len() > 0 {
			s.Keys(now, func(_ []byte, e keyspace.Entry) bool {
				if e.Kind() == keyspace.KindOverride || e.Kind() == keyspace.KindScale {
					m.policyRecords.Store(true)
					return false
				}
				return true
			})
		}
		s.Unlock()
		if m.policyRecords.Load() {
			return
		}
	}
}

// reloadRules points ruleState at what RulesKey holds (after a restore).
func (m *Room) reloadRules() {
	key := []byte(RulesKey)
	s := m.keys.LockKey(key)
	defer s.Unlock()
	var st *RulesState
	if e, ok := s.Get(key, m.core.Applied()); ok && e.Kind() == keyspace.KindRules {
		st, _ = s.Object(e).(*RulesState)
	}
	m.ruleState.Store(st)
}

// listRules answers RL.RULES LIST [domain]: one entry per rule, in domain
// then file order: [domain, rule, path, algorithm, limit, window seconds,
// shadow, "file:line"].
func listRules(x *apply, args [][]byte) {
	set := x.m.rules()
	var rules []*policy.Rule
	for _, name := range set.Domains() {
		if len(args) == 1 && name != string(args[0]) {
			continue
		}
		rules = append(rules, set.Domain(name).Rules...)
	}
	x.w.Array(len(rules))
	for _, r := range rules {
		x.w.Array(8)
		x.w.BulkString(r.Domain)
		x.w.BulkString(r.ID())
		x.w.BulkString(r.Path)
		x.w.BulkString(r.Algorithm.String())
		x.w.Int(r.Limit)
		x.w.Int(limiter.Seconds(r.Window))
		x.w.Int(room.ReplyFlag(r.ShadowMode))
		x.w.BulkString(r.File + ":" + strconv.Itoa(r.Line))
	}
}

// unitSeconds are the units RL.OVERRIDE SET takes, as in envoy's files.
var unitSeconds = map[string]int64{"second": 1, "minute": 60, "hour": 3600, "day": 86400,
	"week": 7 * 86400, "month": 30 * 86400, "year": 365 * 86400}

// checkOverride is RL.OVERRIDE without the state.
func checkOverride(_ *Room, args [][]byte) string {
	switch {
	case resp.EqualFold(args[1], "set"):
		_, _, bad := parseOverrideSet(string(args[2]), args[3:])
		return bad
	case resp.EqualFold(args[1], "del"):
		_, bad := parseOverrideDel(string(args[2]), args[3:])
		return bad
	case resp.EqualFold(args[1], "list"):
		if len(args) != 3 {
			return resp.ErrSyntax
		}
		return ""
	}
	return "ERR unknown subcommand '" + resp.Clip(args[1], 64) + "'. Try SET, DEL, LIST."
}

func runOverride(x *apply, args [][]byte) {
	domain := string(args[2])
	if bad := checkOverride(x.m, args); bad != "" {
		x.Fail(bad)
		return
	}
	switch {
	case resp.EqualFold(args[1], "set"):
		overrideSet(x, domain, args[3:])
	case resp.EqualFold(args[1], "del"):
		key, _ := parseOverrideDel(domain, args[3:])
		s, now := x.LockKey(key)
		n := int64(0)
		if e, ok := s.Get(key, now); ok && e.Kind() == keyspace.KindOverride {
			s.Delete(e)
			x.Deleted(key)
			n = 1
		}
		x.Unlock(s)
		x.w.Int(n)
	default:
		overrideList(x, domain)
	}
}

// parseOverrideDel reads RL.OVERRIDE DEL's DESCRIPTOR k v [k v …]: the
// override's key, or the error reply.
func parseOverrideDel(domain string, args [][]byte) ([]byte, string) {
	var req plan
	if bad := parseDescriptors(args, &req); bad != "" {
		return nil, bad
	}
	if len(req.bounds) != 1 {
		return nil, "ERR RL.OVERRIDE DEL takes one DESCRIPTOR"
	}
	return append(policy.AppendDescriptorKey(nil, domain, req.entries), overrideSuffix...), ""
}

// parseOverrideSet reads RL.OVERRIDE SET's <requests> <unit|seconds>
// [BURST n] [START unix-seconds] [UNTIL unix-seconds] DESCRIPTOR k v [k v
// …]: the override and its key, or the error reply.
func parseOverrideSet(domain string, args [][]byte) (*OverrideState, []byte, string) {
	if len(args) < 2 {
		return nil, nil, resp.ErrArity("rl.override")
	}
	limit, ok := resp.ParseInt(args[0])
	if !ok {
		return nil, nil, resp.ErrNotInteger
	}
	if limit < 1 || limit > 1<<32-1 {
		return nil, nil, "ERR requests must be in [1, 4294967295]"
	}
	window, ok := unitSeconds[string(resp.Lower(args[1]))]
	if !ok {
		if window, ok = resp.ParseInt(args[1]); !ok || window < 1 || window > 10*365*86400 {
			return nil, nil, "ERR unit must be second, minute, hour, day, week, month, year or a number of seconds in [1, 315360000]"
		}
	}
	o := &OverrideState{Limit: limit, Window: window * 1_000_000_000, Burst: -1}
	i := 2
	for i < len(args) && !resp.EqualFold(args[i], "descriptor") {
		if i+1 >= len(args) {
			return nil, nil, resp.ErrSyntax
		}
		v, ok := resp.ParseInt(args[i+1])
		if !ok {
			return nil, nil, resp.ErrNotInteger
		}
		switch {
		case resp.EqualFold(args[i], "burst") && v >= 0 && v < 1<<32:
			o.Burst = v
		case (resp.EqualFold(args[i], "start") || resp.EqualFold(args[i], "until")) && v > 0 && v < 9_000_000_000:
			if resp.EqualFold(args[i], "start") {
				o.Start = v * 1_000_000_000
			} else {
				o.Until = v * 1_000_000_000
			}
		default:
			return nil, nil, "ERR syntax error: options are BURST <n>, START <unix-seconds>, UNTIL <unix-seconds>, then DESCRIPTOR"
		}
		i += 2
	}
	var req plan
	if bad := parseDescriptors(args[i:], &req); bad != "" {
		return nil, nil, bad
	}
	if len(req.bounds) != 1 {
		return nil, nil, "ERR RL.OVERRIDE SET takes one DESCRIPTOR"
	}
	if o.Until != 0 && o.Until <= o.Start {
		return nil, nil, "ERR UNTIL must be after START"
	}
	// Whatever rule it overrides, the limit must be one RL.CHECK can
	// apply: as a GCRA rate (the strictest reading) it must not pass one
	// unit per nanosecond.
	if err := (gcra.Limit{MaxBurst: max(o.Burst, 0), Count: o.Limit, Period: o.Window}).Validate(); err != nil {
		return nil, nil, "ERR override not applicable: " + room.WithoutPackage(err)
	}
	for _, e := range req.entries {
		o.Entries = append(o.Entries, policy.Entry{Key: string(e.Key), Value: string(e.Value)})
	}
	return o, append(policy.AppendDescriptorKey(nil, domain, req.entries), overrideSuffix...), ""
}

// overrideSet is RL.OVERRIDE SET <domain> <requests> <unit|seconds>
// [BURST n] [START unix-seconds] [UNTIL unix-seconds] DESCRIPTOR k v [k v …].
func overrideSet(x *apply, domain string, args [][]byte) {
	o, key, bad := parseOverrideSet(domain, args)
	if bad != "" {
		x.Fail(bad)
		return
	}
	// The rule the descriptor matches now must take it too (a sliding log
	// holds at most window.MaxLogLimit).
	if d := x.m.rules().Domain(domain); d != nil {
		entries := make([]policy.Entry, len(o.Entries))
		copy(entries, o.Entries)
		if r := d.Match(entries); r != nil && r.Algorithm == policy.SlidingExact && o.Limit > window.MaxLogLimit {
			x.Fail(room.ErrorReply(window.ErrLogLimit) + " (the rule " + r.ID() + " is an exact sliding window)")
			return
		}
	}
	s, now := x.LockKey(key)
	defer x.Unlock(s)
	if o.Until != 0 && o.Until <= now {
		x.Fail("ERR UNTIL is in the past")
		return
	}
	e, found := s.Get(key, now)
	if found {
		s.Delete(e)
	}
	x.m.policyRecords.Store(true)
	if _, err := s.Insert(key, keyspace.KindOverride, o.Until, o); err != nil {
		x.Error(err)
		return
	}
	x.Changed(key, keyspace.KindOverride, o.Until, o)
	x.w.OK()
}

// overrideList answers RL.OVERRIDE LIST <domain>: one entry per override
// in key order, [[k, v, …], requests, window seconds, burst (-1: the
// rule's), start, until (Unix seconds, 0: unbounded)].
func overrideList(x *apply, domain string) {
	prefix := policy.AppendDescriptorKey(nil, domain, nil)
	s, now := x.LockKey(prefix)
	found := overridesIn(s, prefix, now)
	x.Unlock(s)
	x.w.Array(len(found))
	for _, o := range found {
		x.w.Array(6)
		x.w.Array(2 * len(o.Entries))
		for _, e := range o.Entries {
			x.w.BulkString(e.Key)
			x.w.BulkString(e.Value)
		}
		x.w.Int(o.Limit)
		x.w.Int(o.Window / 1_000_000_000)
		x.w.Int(o.Burst)
		x.w.Int(o.Start / 1_000_000_000)
		x.w.Int(o.Until / 1_000_000_000)
	}
}

// parseScaleSet reads RL.SCALE SET <domain> <factor> [RECOVER seconds]:
// the factor (millionths) and recovery (ns), or the error reply.
func parseScaleSet(args [][]byte) (factor, recovery int64, bad string) {
	if len(args) != 4 && len(args) != 6 {
		return 0, 0, resp.ErrSyntax
	}
	factor, ok := parseFactor(args[3])
	if !ok {
		return 0, 0, "ERR factor must be a decimal in (0, 1] with at most 6 digits after the point"
	}
	recovery = int64(DefaultRecovery)
	if len(args) == 6 {
		sec, ok := resp.ParseInt(args[5])
		if !resp.EqualFold(args[4], "recover") || !ok || sec < 0 || sec > maxRecoverySeconds {
			return 0, 0, "ERR syntax error: RECOVER <seconds in [0, 86400]>"
		}
		recovery = sec * 1_000_000_000
	}
	return factor, recovery, ""
}

// checkScale is RL.SCALE without the state.
func checkScale(_ *Room, args [][]byte) string {
	switch {
	case resp.EqualFold(args[1], "set"):
		_, _, bad := parseScaleSet(args)
		return bad
	case resp.EqualFold(args[1], "get"):
		if len(args) != 3 {
			return resp.ErrSyntax
		}
		return ""
	}
	return "ERR unknown subcommand '" + resp.Clip(args[1], 64) + "'. Try SET, GET."
}

func runScale(x *apply, args [][]byte) {
	if bad := checkScale(x.m, args); bad != "" {
		x.Fail(bad)
		return
	}
	domain := string(args[2])
	key := append(policy.AppendDescriptorKey(nil, domain, nil), scaleSuffix...)
	switch {
	case resp.EqualFold(args[1], "set"):
		factor, recovery, _ := parseScaleSet(args)
		s, now := x.LockKey(key)
		defer x.Unlock(s)
		current := scaleAt(s, key, now)
		st := &ScaleState{From: current, To: factor, Since: now, Recovery: recovery}
		if e, found := s.Get(key, now); found {
			s.Delete(e)
		}
		x.m.policyRecords.Store(true)
		if _, err := s.Insert(key, keyspace.KindScale, 0, st); err != nil {
			x.Error(err)
			return
		}
		x.Changed(key, keyspace.KindScale, 0, st)
		x.w.OK()
	default: // get
		s, now := x.LockKey(key)
		factor, target, left := int64(ScaleUnit), int64(ScaleUnit), int64(0)
		if e, ok := s.Get(key, now); ok && e.Kind() == keyspace.KindScale {
			if st, _ := s.Object(e).(*ScaleState); st != nil {
				factor, target = st.At(now), st.To
				left = max(0, st.RecoveredAt()-now) / 1_000_000
			}
		}
		x.Unlock(s)
		x.w.Array(3)
		x.w.BulkString(formatFactor(factor))
		x.w.BulkString(formatFactor(target))
		x.w.Int(left)
	}
}

// parseFactor reads a decimal in (0, 1] ("0.25", "1", ".5") as millionths,
// in integers only.
func parseFactor(b []byte) (int64, bool) {
	intPart, frac, dot := b, []byte(nil), bytes.IndexByte(b, '.')
	if dot >= 0 {
		intPart, frac = b[:dot], b[dot+1:]
	}
	if len(intPart)+len(frac) == 0 || len(frac) > 6 || len(intPart) > 1 {
		return 0, false
	}
	v := int64(0)
	for _, c := range intPart {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = int64(c-'0') * ScaleUnit
	}
	scale := int64(ScaleUnit / 10)
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, false
		}
		v += int64(c-'0') * scale
		scale /= 10
	}
	return v, v > 0 && v <= ScaleUnit
}

// formatFactor writes millionths as a decimal with six places.
func formatFactor(v int64) string {
	frac := strconv.FormatInt(ScaleUnit+v%ScaleUnit, 10)[1:]
	return strconv.FormatInt(v/ScaleUnit, 10) + "." + frac
}

// DomainOverrides lists the overrides of a domain live at now, in key
// order, for a read that is not a command (the status page); the states
// must not be changed.
func (m *Room) DomainOverrides(domain string, now int64) []*OverrideState {
	prefix := policy.AppendDescriptorKey(nil, domain, nil)
	s := m.keys.LockKey(prefix)
	defer s.Unlock()
	return overridesIn(s, prefix, m.core.ReadInstant(now))
}

// overridesIn finds the overrides under prefix (a domain's) in slot s
// (locked), in key order: one pass in the slot's own order keeping only
// the overrides — the domain's slot holds its scale and whatever clients
// put there too — and a sort of the few found.
func overridesIn(s *keyspace.Slot, prefix []byte, now int64) []*OverrideState {
	type listed struct {
		key []byte
		o   *OverrideState
	}
	var all []listed
	s.KeysUnordered(now, func(key []byte, e keyspace.Entry) bool {
		if e.Kind() == keyspace.KindOverride && bytes.HasPrefix(key, prefix) && len(key) > len(prefix) && key[len(prefix)] == '/' {
			if o, ok := s.Object(e).(*OverrideState); ok {
				all = append(all, listed{bytes.Clone(key), o})
			}
		}
		return true
	})
	slices.SortFunc(all, func(a, b listed) int { return bytes.Compare(a.key, b.key) })
	out := make([]*OverrideState, len(all))
	for i, l := range all {
		out[i] = l.o
	}
	return out
}

// DomainScale is a domain's scale factor at now and the factor it moves
// to (millionths; ScaleUnit when none is set), for a read that is not a
// command.
func (m *Room) DomainScale(domain string, now int64) (factor, target int64) {
	key := append(policy.AppendDescriptorKey(nil, domain, nil), scaleSuffix...)
	s := m.keys.LockKey(key)
	defer s.Unlock()
	now = m.core.ReadInstant(now)
	if e, ok := s.Get(key, now); ok && e.Kind() == keyspace.KindScale {
		if st, _ := s.Object(e).(*ScaleState); st != nil {
			return st.At(now), st.To
		}
	}
	return ScaleUnit, ScaleUnit
}

// FormatFactor writes a scale factor in millionths as a decimal.
func FormatFactor(v int64) string { return formatFactor(v) }
