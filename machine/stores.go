package machine

// Stores reports whether applying args (cmd's, the command's name first)
// at now could add a record — a new key, a reservation — or grow one that
// exists (an exact sliding log's entries, a CONC key's leases, a lease
// holder's), rather than change records in place. Over maxmemory the
// server refuses a command that would store more and keeps serving the
// rest, so a limiter keeps limiting the keys it knows with the state they
// have (Redis' denyoom, with sluice's noeviction: nothing is ever
// evicted). It reads the keyspace under each slot's lock
// and changes nothing; a command it cannot see into counts as storing.
// Call it only for a well-formed command (Command.Check passed).
func (m *Machine) Stores(cmd *Command, args [][]byte, now int64) bool {
	if cmd.stores != nil {
		return cmd.stores(m, args, now)
	}
	keys := cmd.Keys(args)
	if len(keys) == 0 {
		return true
	}
	for _, k := range keys {
		if !m.Exists(args[k], now) {
			return true
		}
	}
	return false
}

// Exists reports whether key holds a live record at now (room.View).
func (m *Machine) Exists(key []byte, now int64) bool {
	r := m.keys.View().ReadKey(key)
	defer r.Unlock()
	_, ok := r.Get(key, now)
	return ok
}

// neverStores is EXEC's: its commands were checked as they were queued.
func neverStores(*Machine, [][]byte, int64) bool { return false }
