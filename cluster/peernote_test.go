package cluster

import (
	"reflect"
	"testing"
	"time"
)

func TestPeerNoteRoundTrip(t *testing.T) {
	peers := []PeerState{
		{Member: Member{ID: "n1"}, Online: true, LastContact: 0, MatchIndex: 9},
		{Member: Member{ID: "n2"}, Online: false, LastContact: -1},
		{Member: Member{ID: "a-much-longer-member-id"}, Online: true, LastContact: 1500 * time.Millisecond, MatchIndex: 1 << 40},
	}
	got, err := parsePeerNote(appendPeerNote(nil, peers))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]peerNoted{"n1": {online: true, contact: 0, match: 9}, "n2": {contact: -1},
		"a-much-longer-member-id": {online: true, contact: 1500 * time.Millisecond, match: 1 << 40}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// Every cut and every flipped byte of a note is refused or read whole; none
// panics.
func TestPeerNoteMalformed(t *testing.T) {
	good := appendPeerNote(nil, []PeerState{{Member: Member{ID: "n1"}, Online: true, MatchIndex: 3}})
	for cut := range len(good) {
		if _, err := parsePeerNote(good[:cut]); err == nil {
			t.Fatalf("a note cut at %d parsed", cut)
		}
	}
	for i := range good {
		for _, b := range []byte{0, 2, 0x7f, 0xff} {
			bad := append([]byte(nil), good...)
			bad[i] = b
			parsePeerNote(bad)
		}
	}
	if _, err := parsePeerNote(append(good, 0)); err == nil {
		t.Fatal("trailing bytes parsed")
	}
}

// A note from an entry logged before the node started, or from an older
// term, is not news; a stale one is not trusted.
func TestPeerNotesKeepOnlyLiveNews(t *testing.T) {
	note := appendPeerNote(nil, []PeerState{{Member: Member{ID: "n2"}, Online: true, MatchIndex: 7}})
	p := peerNotes{liveFrom: 10}
	p.keep(10, 3, note)
	if _, _, ok := p.lookup("n2", 3, time.Hour); ok {
		t.Fatal("a replayed note was kept")
	}
	p.keep(11, 3, note)
	if s, _, ok := p.lookup("n2", 3, time.Hour); !ok || !s.online || s.match != 7 {
		t.Fatalf("a live note: %+v %v", s, ok)
	}
	if _, _, ok := p.lookup("n2", 4, time.Hour); ok {
		t.Fatal("a note of term 3 trusted in term 4")
	}
	if _, _, ok := p.lookup("n2", 3, 0); ok {
		t.Fatal("a stale note trusted")
	}
	if _, _, ok := p.lookup("n9", 3, time.Hour); ok {
		t.Fatal("a member the note does not name is known")
	}
}

// A sibling's last contact, as a follower tells it, is the leader's
// figure aged by how old the note is; a member never heard from stays
// never; one the note does not name is unknown.
func TestNotedStateAgesWithItsNote(t *testing.T) {
	m := Member{ID: "n3"}
	within := 1300 * time.Millisecond
	p := notedState(m, peerNoted{online: true, contact: 1500 * time.Millisecond, match: 4}, 2*time.Second, true, within)
	if !p.Known || p.Online || p.MatchIndex != 4 || p.LastContact != 3500*time.Millisecond {
		t.Fatalf("a note 2 s old of a contact 1.5 s before it (online past %v): %+v", within, p)
	}
	// A sibling the leader heard 20 ms before a note 1 s old is online; one
	// last heard 1.8 s ago is not, whatever the note said then.
	if p := notedState(m, peerNoted{online: true, contact: 20 * time.Millisecond}, time.Second, true, within); !p.Online {
		t.Fatalf("heard 1.02 s ago, online within %v: %+v", within, p)
	}
	if p := notedState(m, peerNoted{online: true, contact: 200 * time.Millisecond}, 1600*time.Millisecond, true, within); p.Online {
		t.Fatalf("heard 1.8 s ago, online within %v: %+v", within, p)
	}
	if p := notedState(m, peerNoted{contact: -1}, time.Second, true, within); p.LastContact != -1 || !p.Known {
		t.Fatalf("never heard from: %+v", p)
	}
	if p := notedState(m, peerNoted{online: true}, time.Second, false, within); p.Known || p.Online || p.LastContact != -1 {
		t.Fatalf("not named: %+v", p)
	}
}
