package server

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// poller is one event loop's epoll instance, with an eventfd that wakes
// it from other goroutines (a connection handed in or back, shutdown).
//
// The loop does not block in epoll_wait: a goroutine blocked in a system
// call holds a thread, and when it wakes it may find its processor given
// away and wait for another (a single connection's round trip took 24 µs
// that way, 5 with Go's own poller; against redis-benchmark with 1 to 50
// clients, blocking lost 15–30% of the requests per second). Instead the
// epoll descriptor itself sits in Go's poller, which parks the loop's
// goroutine until it has events; the loop then collects them with a wait
// of zero.
type poller struct {
	// spin is how long wait polls before it parks (Config.LoopSpin);
	// spinScore and parks decide whether it polls this time (spinNow).
	spin      time.Duration
	spinScore int
	parks     uint
	// last is how many events the last wait returned.
	last   int
	epfd   int
	file   *os.File // epfd, registered with Go's poller
	raw    syscall.RawConn
	wakefd int
	events []unix.EpollEvent
	// collect is the RawConn.Read callback, bound once (no allocation per
	// wait); it leaves what it collected in n and err.
	collect func(fd uintptr) bool
	n       int
	err     error
}

// wakeTag is the epoll data of the eventfd: no socket has descriptor -1.
const wakeTag = -1

func newPoller(spin time.Duration) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p := &poller{spin: spin, epfd: epfd, wakefd: wakefd, events: make([]unix.EpollEvent, 256)}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: wakeTag}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		p.close()
		return nil, err
	}
	// Non-blocking first: os.NewFile registers only such descriptors
	// with Go's poller.
	if err := unix.SetNonblock(epfd, true); err != nil {
		p.close()
		return nil, err
	}
	p.file = os.NewFile(uintptr(epfd), "epoll")
	raw, err := p.file.SyscallConn()
	if err != nil {
		p.close()
		return nil, err
	}
	p.raw = raw
	p.collect = p.collectNow
	return p, nil
}

// watch reports fd when it is readable, closed or failed, level-triggered:
// bytes left unread are reported again.
func (p *poller) watch(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	return unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// unwatch stops reporting fd.
func (p *poller) unwatch(fd int) error {
	return unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// wait returns the ready descriptors' events (wakeTag for a wake-up).
// If park is set and nothing is ready, it may first poll for p.spin (see
// spinNow), then parks until something is. A park and its wake-up go
// through Go's scheduler and the thread that waits in its poller; a
// client at one request per round trip usually sends its next request
// sooner than that costs (issue #22, `CL.THROTTLE`, 30 µs against none, 7
// alternating pairs: one client 12–17k → 15–29k requests/s, as Redis'
// INCR does; 50 clients at -P 1 the same requests/s, p99 lower in 5 of
// 7; -P 16 polls on ~5% of waits and is unchanged). The slice is reused
// by the next wait.
func (p *poller) wait(park bool) ([]unix.EpollEvent, error) {
	p.n, p.err = 0, nil
	if !park || p.spinNow() {
		var until time.Time
		for {
			n, err := unix.EpollWait(p.epfd, p.events, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if n != 0 || err != nil || !park {
				if park && !until.IsZero() {
					p.spun(true)
				}
				p.last = max(n, 0)
				return p.events[:p.last], err
			}
			now := time.Now()
			if until.IsZero() {
				until = now.Add(p.spin)
			} else if now.After(until) {
				p.spun(false)
				break
			}
		}
	}
	if err := p.raw.Read(p.collect); err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	p.last = p.n
	return p.events[:p.n], nil
}

// collectNow takes the events ready now; false (none) parks the loop in
// Go's poller until there are some.
// A signal that interrupts the poll is no answer: it polls again, for
// parking then could wait on events already ready (Go's poller is told of
// new readiness, not of what was ready before it parked).
func (p *poller) collectNow(fd uintptr) bool {
	for {
		n, err := unix.EpollWait(int(fd), p.events, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		p.n, p.err = max(n, 0), err
		return n > 0 || err != nil
	}
}

// wake makes the loop's wait return; safe from any goroutine.
func (p *poller) wake() {
	var one = [8]byte{1}
	unix.Write(p.wakefd, one[:])
}

// drainWake consumes the wake-ups so far.
func (p *poller) drainWake() {
	var b [8]byte
	unix.Read(p.wakefd, b[:])
}

func (p *poller) close() {
	unix.Close(p.wakefd)
	if p.file != nil {
		p.file.Close()
		return
	}
	unix.Close(p.epfd)
}

// spinNow reports whether this wait should poll before parking: while
// polling mostly finds the next request in time (clients at one request per
// round trip), and on one wait in 16 otherwise, to notice when it would
// again. With clients that pipeline, the next batch comes later than any
// short poll: polling then only burns the CPU the clients and the kernel's
// network path need (polling before every park lost 10–30% at -P 16 in
// one run of alternating pairs).
func (p *poller) spinNow() bool {
	if p.spin <= 0 {
		return false
	}
	if p.last > spinFewEvents {
		return false
	}
	p.parks++
	return p.spinScore >= 0 || p.parks%16 == 0
}

// spinFewEvents is the most events the last wait may have returned for
// this one to poll: a loop that served many connections at once has
// enough clients to keep it busy without polling.
const spinFewEvents = 2

// spun records whether a poll found something before its time ran out.
func (p *poller) spun(found bool) {
	if found {
		p.spinScore = min(p.spinScore+1, 8)
	} else {
		p.spinScore = max(p.spinScore-1, -8)
	}
}
