package server

import (
	"errors"
	"os"
	"syscall"

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

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p := &poller{epfd: epfd, wakefd: wakefd, events: make([]unix.EpollEvent, 256)}
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

// wait returns the ready descriptors' events (wakeTag for a wake-up),
// parking until something is ready if park is set. The slice is reused by
// the next wait.
func (p *poller) wait(park bool) ([]unix.EpollEvent, error) {
	p.n, p.err = 0, nil
	if !park {
		n, err := unix.EpollWait(p.epfd, p.events, 0)
		if errors.Is(err, unix.EINTR) {
			return nil, nil
		}
		return p.events[:max(n, 0)], err
	}
	if err := p.raw.Read(p.collect); err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	return p.events[:p.n], nil
}

// collectNow takes the events ready now; false (none) parks the loop in
// Go's poller until there are some.
func (p *poller) collectNow(fd uintptr) bool {
	n, err := unix.EpollWait(int(fd), p.events, 0)
	if errors.Is(err, unix.EINTR) {
		return false
	}
	p.n, p.err = max(n, 0), err
	return n > 0 || err != nil
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
