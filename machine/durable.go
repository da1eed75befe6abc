package machine

import (
	"github.com/sluice-rl/sluice/keyspace"
	"github.com/sluice-rl/sluice/machine/room"
	"github.com/sluice-rl/sluice/quota"
)

// Durability is where applies send the changes that must outlive the
// process: quota states are written through to disk as they change (other
// kinds are only snapshotted). Every method is called under the lock of
// the slot the change is in (Flushed under every slot's lock), must not do
// I/O, and returns a Ticket the caller waits on before the reply leaves.
// It is an output of apply, never an input: nothing it does changes a reply.
type Durability interface {
	// QuotaChanged records key's new state.
	QuotaChanged(key []byte, st *quota.State) Ticket
	// RecordChanged records the new state of a key of another journaled
	// kind (see Journaled): its kind, expiry and EncodeState bytes.
	RecordChanged(key []byte, kind keyspace.Kind, expireAt int64, state []byte) Ticket
	// QuotaDeleted records that key, of a journaled kind, was deleted.
	QuotaDeleted(key []byte) Ticket
	// Flushed records that every key was dropped.
	Flushed() Ticket
}

// DurableWaiter is what a Ticket waits on (room.DurableWaiter).
type DurableWaiter = room.DurableWaiter

// Ticket is a journaled change that a reply may have to wait for
// (room.Ticket).
type Ticket = room.Ticket

// NewTicket is the ticket for change seq of w; seq 0 needs no wait.
func NewTicket(w DurableWaiter, seq uint64) Ticket { return room.NewTicket(w, seq) }
