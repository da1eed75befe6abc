package tests

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"
)

// readLines reads n one-line replies (simple strings and errors).
func readLines(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d replies: %v", len(out), err)
		}
		out = append(out, strings.TrimRight(l, "\r\n"))
	}
	return out
}

// A MULTI queue is bounded by count: the command past 100000 is refused
// while queuing, with the reason, and so is every one after it (nothing
// more is held), EXEC answers EXECABORT with the reason, and the
// connection goes on.
func TestMultiQueueBoundedByCount(t *testing.T) {
	s := StartServer(t)
	c := dialRaw(t, s.Addr)
	c.SetDeadline(time.Now().Add(120 * time.Second))
	const over = 1000
	n := 100_000 + over
	key := strings.Repeat("k", 190)
	go func() {
		w := bufio.NewWriterSize(c, 1<<16)
		w.WriteString("MULTI\r\n")
		for i := range n {
			k := fmt.Sprintf("%s%08d", key, i)
			fmt.Fprintf(w, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n10\r\n$2\r\n20\r\n$2\r\n60\r\n", len(k), k)
		}
		w.WriteString("EXEC\r\nPING\r\n")
		w.Flush()
	}()
	r := bufio.NewReaderSize(c, 1<<16)
	replies := readLines(t, r, n+3)
	if replies[0] != "+OK" {
		t.Fatalf("MULTI: %q", replies[0])
	}
	queued, refused := 0, 0
	for _, l := range replies[1 : n+1] {
		switch {
		case l == "+QUEUED":
			if refused > 0 {
				t.Fatal("a command was queued after the queue refused one")
			}
			queued++
		case l == "-ERR MULTI queue full: at most 100000 commands in one transaction":
			refused++
		default:
			t.Fatalf("reply %q", l)
		}
	}
	if queued != 100_000 || refused != over {
		t.Fatalf("%d queued, %d refused; want 100000 and %d", queued, refused, over)
	}
	if want := "-EXECABORT Transaction discarded because of previous errors: MULTI queue full: at most 100000 commands in one transaction."; replies[n+1] != want {
		t.Fatalf("EXEC: %q, want %q", replies[n+1], want)
	}
	if replies[n+2] != "+PONG" {
		t.Fatalf("after EXECABORT: %q", replies[n+2])
	}
	if n, err := s.Client().DBSize(ctx(t)).Result(); err != nil || n != 0 {
		t.Fatalf("an aborted transaction wrote %d keys (%v)", n, err)
	}
}

// ... and by bytes: 32 MiB of arguments. Once full the queue stays full: a
// small command after the refused ones is refused too, and EXEC says why.
func TestMultiQueueBoundedByBytes(t *testing.T) {
	s := StartServer(t)
	c := dialRaw(t, s.Addr)
	big := strings.Repeat("x", 1<<20)
	go func() {
		w := bufio.NewWriterSize(c, 1<<16)
		w.WriteString("MULTI\r\n")
		for range 40 {
			fmt.Fprintf(w, "*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(big), big)
		}
		w.WriteString("ECHO small\r\nEXEC\r\n")
		w.Flush()
	}()
	replies := readLines(t, bufio.NewReader(c), 43)
	queued := 0
	for _, l := range replies[1:42] {
		if l == "+QUEUED" {
			queued++
		} else if l != "-ERR MULTI queue full: at most 32 MiB of arguments in one transaction" {
			t.Fatalf("reply %q", l)
		}
	}
	if queued != 31 || !strings.HasPrefix(replies[42], "-EXECABORT") || !strings.Contains(replies[42], "32 MiB") {
		t.Fatalf("%d queued (want 31), EXEC %q", queued, replies[42])
	}
}
