package policy

// ApplyReplaces drops, in place, the rules another rule of the same request
// replaces, as envoy does: every rule in matched (one per descriptor of the
// request; nil where a descriptor matched nothing) contributes its Replaces
// names, then each rule whose name is among them is set to nil: it is not
// checked and its counter is left untouched. Unlimited rules replace too,
// and a rule that is itself replaced still replaces others. Up to 64
// descriptors it allocates nothing; requests carry a handful, so the
// quadratic scan beats building a set.
func ApplyReplaces(matched []*Rule) {
	if len(matched) > 64 {
		drop := make([]bool, len(matched))
		for i, r := range matched {
			drop[i] = Replaced(matched, r)
		}
		for i := range matched {
			if drop[i] {
				matched[i] = nil
			}
		}
		return
	}
	var drop uint64
	for i, r := range matched {
		if Replaced(matched, r) {
			drop |= 1 << uint(i)
		}
	}
	for i := range matched {
		if drop&(1<<uint(i)) != 0 {
			matched[i] = nil
		}
	}
}

// Replaced reports whether r (named) is replaced by any rule in matched.
func Replaced(matched []*Rule, r *Rule) bool {
	if r == nil || r.Name == "" {
		return false
	}
	for _, o := range matched {
		if o == nil {
			continue
		}
		for _, n := range o.Replaces {
			if n == r.Name {
				return true
			}
		}
	}
	return false
}
