package httplimit_test

import (
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/httplimit"
)

// A streamed LLM endpoint limited in tokens per tenant: the request's
// max_tokens is reserved before the handler runs, and the tokens the
// response really took are settled after it (the rest given back).
func ExampleReserve() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	limit, err := httplimit.New(httplimit.Config{
		Client: client,
		Key:    func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		Limit: httplimit.Reserve{
			Domain: "llm", // a rules file: domain llm, a limit on key tenant
			Descriptors: func(_ *http.Request, tenant string) [][]httplimit.Entry {
				return [][]httplimit.Entry{{{Key: "tenant", Value: tenant}}}
			},
			Estimate: func(r *http.Request) int64 {
				n, _ := strconv.ParseInt(r.URL.Query().Get("max_tokens"), 10, 64)
				return n
			},
			TTL: 5 * time.Minute,
		},
	})
	if err != nil {
		panic(err)
	}
	http.Handle("/v1/completions", limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := streamCompletion(w, r)          // the model's response, streamed
		httplimit.ReportCost(r.Context(), used) // settled once the handler returns
	})))
}

func streamCompletion(http.ResponseWriter, *http.Request) int64 { return 0 }
