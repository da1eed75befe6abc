package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"
)

// h2Streams is a bare HTTP/2 client that opens gRPC streams and never
// sends their bodies, as an attacker would; it counts how the server ends
// them.
type h2Streams struct {
	c    net.Conn
	fr   *http2.Framer
	next uint32
	mu   sync.Mutex
	// ended counts streams the server ended: by RST_STREAM, or by HEADERS
	// with END_STREAM (a gRPC status); statuses are their grpc-status.
	ended    int
	statuses map[string]int
	seen     map[uint32]bool
	closed   chan struct{}
}

func dialH2(t *testing.T, addr string) *h2Streams {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &h2Streams{c: c, fr: http2.NewFramer(c, c), next: 1, statuses: map[string]int{}, seen: map[uint32]bool{}, closed: make(chan struct{})}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go h.read()
	return h
}

func (h *h2Streams) read() {
	defer close(h.closed)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		h.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.fr.WritePing(true, f.Data)
			}
		case *http2.RSTStreamFrame:
			h.end(f.StreamID, "rst:"+f.ErrCode.String())
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				h.end(f.StreamID, f.PseudoValue("status")+"/"+grpcStatusOf(f))
			}
		}
		h.mu.Unlock()
	}
}

// end counts a stream's end once (a status in trailers may be followed by
// RST_STREAM NO_ERROR).
func (h *h2Streams) end(id uint32, how string) {
	if !h.seen[id] {
		h.seen[id] = true
		h.ended++
		h.statuses[how]++
	}
}

func grpcStatusOf(f *http2.MetaHeadersFrame) string {
	for _, hf := range f.Fields {
		if hf.Name == "grpc-status" {
			return hf.Value
		}
	}
	return "?"
}

const (
	shouldRateLimitPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	healthCheckPath     = "/grpc.health.v1.Health/Check"
)

// open sends the headers of n calls to path and no bodies; extra are more
// header fields (authorization, a large one).
func (h *h2Streams) open(t *testing.T, n int, path string, extra ...hpack.HeaderField) {
	t.Helper()
	if err := h.tryOpen(n, path, extra...); err != nil {
		t.Fatal(err)
	}
}

// tryOpen is open, returning a write error (the server closed the
// connection) instead of failing.
func (h *h2Streams) tryOpen(n int, path string, extra ...hpack.HeaderField) error {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for range n {
		buf.Reset()
		for _, hf := range append([]hpack.HeaderField{
			{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: path},
			{Name: ":authority", Value: "sluice"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		}, extra...) {
			enc.WriteField(hf)
		}
		h.mu.Lock()
		err := writeHeaderBlock(h.fr, h.next, buf.Bytes())
		h.next += 2
		h.mu.Unlock()
		if err != nil {
			return fmt.Errorf("writing stream %d's headers: %w", h.next-2, err)
		}
	}
	return nil
}

// writeHeaderBlock sends a header block as HEADERS and CONTINUATION frames
// of at most 16 KiB each.
func writeHeaderBlock(fr *http2.Framer, id uint32, block []byte) error {
	const most = 16 << 10
	first := block[:min(len(block), most)]
	rest := block[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		chunk := rest[:min(len(rest), most)]
		rest = rest[len(chunk):]
		if err := fr.WriteContinuation(id, len(rest) == 0, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (h *h2Streams) counts() (int, map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.statuses {
		out[k] = v
	}
	return h.ended, out
}

func rssOf(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	n, err := strconv.ParseInt(infoField(t, c, "memory", "used_memory_rss"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue #43: nobody can take the gRPC door's memory before the password.
// With --requirepass under ulimit -n 400: 20,000 streams without the
// password, headers only, are refused on their headers (UNAUTHENTICATED,
// grpc-status 16) and RSS grows by less than 150 MB; streams with the
// password that never send a body are held at most --grpc-read-timeout
// (then their connection is cut) and at most 1024 at once (the rest
// RESOURCE_EXHAUSTED, 8); a 1 MB header
// is refused; an authenticated ShouldRateLimit is answered throughout.
func TestGRPCStreamsBeforeTheirBody(t *testing.T) {
	rules := writeRules(t, "edge.yaml", rlsClusterRules)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	s := startLimited(t, 400, "--requirepass", "s3cret", "--rules", rules, "--grpc-addr", grpcAddr, "--grpc-read-timeout", "2s",
		"--http-addr", httpAddr)
	c := s.Client(func(o *redis.Options) { o.Password = "s3cret" })
	defer c.Close()
	before := rssOf(t, c)

	var attackers []*h2Streams
	for range 20 {
		h := dialH2(t, grpcAddr)
		h.open(t, 1000, shouldRateLimitPath)
		attackers = append(attackers, h)
	}
	eventually(t, "the server ends all 20,000 unauthenticated streams", func() bool {
		for _, h := range attackers {
			if n, _ := h.counts(); n < 1000 {
				return false
			}
		}
		return true
	})
	for _, h := range attackers {
		if _, st := h.counts(); st["200/16"] != 1000 {
			t.Fatalf("unauthenticated streams ended as %v, want 1000 × grpc-status 16", st)
		}
	}
	if grew := rssOf(t, c) - before; grew > 150<<20 {
		t.Fatalf("20,000 unauthenticated streams grew RSS by %d MB", grew>>20)
	}

	// Health checks need no password: 2000 of them without a body, 1024
	// wait, the rest are refused, and the waiting ones end after the read
	// timeout; they never crowd out a call that carries the password.
	auth := hpack.HeaderField{Name: "authorization", Value: "Bearer s3cret"}
	held := []*h2Streams{dialH2(t, grpcAddr), dialH2(t, grpcAddr)}
	held[0].open(t, 1000, healthCheckPath)
	held[1].open(t, 1000, healthCheckPath)
	eventually(t, "streams past the waiting budget are refused", func() bool {
		_, a := held[0].counts()
		_, b := held[1].counts()
		return a["200/8"]+b["200/8"] == 2000-1024
	})
	client, _ := rlsClient(t, grpcAddr)
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret"), 5*time.Second)
	defer cancel()
	if _, err := client.ShouldRateLimit(cctx, rlsRequest("edge", 1, "path=/in")); err != nil {
		t.Fatalf("ShouldRateLimit beside the held streams: %v", err)
	}
	start := time.Now()
	for _, h := range held {
		select {
		case <-h.closed:
		case <-time.After(5 * time.Second):
			t.Fatal("a connection with streams that sent no body is still open 5 s after they came (read timeout 2s)")
		}
	}
	t.Logf("connections with streams that sent no body cut after %v", time.Since(start))
	if v := metricValue(t, httpAddr, "sluice_grpc_calls_refused_total"); v < 20_000+2000-1024 {
		t.Fatalf("sluice_grpc_calls_refused_total %v, want at least %d", v, 20_000+2000-1024)
	}
	// Each held call counts itself as its handler returns, which may be
	// just after its connection is cut.
	var overdue float64
	eventuallyExplained(t, "the 1024 held calls counted overdue", func() bool {
		overdue = metricValue(t, httpAddr, "sluice_grpc_calls_overdue_total")
		return overdue >= 1024
	}, func() string { return fmt.Sprint("sluice_grpc_calls_overdue_total ", overdue) })
	if _, err := client.ShouldRateLimit(cctx, rlsRequest("edge", 1, "path=/in")); err != nil {
		t.Fatalf("ShouldRateLimit after the held streams ended: %v", err)
	}

	// A header list past 16 KiB ends the stream or the connection.
	big := dialH2(t, grpcAddr)
	big.tryOpen(1, shouldRateLimitPath, auth, hpack.HeaderField{Name: "x-big", Value: strings.Repeat("a", 1<<20)})
	select {
	case <-big.closed:
	case <-time.After(5 * time.Second):
		if n, st := big.counts(); n == 0 {
			t.Fatalf("a 1 MB header list was taken: %v", st)
		}
	}
}
