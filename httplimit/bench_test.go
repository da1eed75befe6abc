package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// constDoer answers every command with the same allowed limiter reply,
// so the benchmark measures the middleware, not the network.
type constDoer struct{}

func (constDoer) Do(ctx context.Context, args ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetVal([]any{int64(0), int64(100), int64(99), int64(-1), int64(60)})
	return cmd
}

// The middleware's own cost per request: key, breaker, timeout goroutine,
// decode and both headers.
func BenchmarkHandlerOverhead(b *testing.B) {
	m, err := New(Config{
		Client: constDoer{}, Key: RemoteAddr("ip:"),
		Limit: SlidingWindow{Limit: 100, Window: time.Minute}, Timeout: time.Second,
		OnError: func(_ *http.Request, err error) { b.Fatal(err) },
	})
	if err != nil {
		b.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Header().Get(HeaderRateLimit) == "" {
			b.Fatal("no RateLimit header")
		}
	}
}
