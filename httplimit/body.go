package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// problem is an RFC 9457 problem details body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies is the extension member of the draft's
	// quota-exceeded problem type.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter repeats the Retry-After header, in seconds.
	RetryAfter int64 `json:"retry-after"`
}

// quotaExceeded is the problem type draft-ietf-httpapi-ratelimit-headers-10
// §5.1 registers for a request over a quota policy.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// writeProblem sends status with Retry-After and a problem+json body.
func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // a struct of strings and integers always marshals
		panic(err)
	}
	h := w.Header()
	h.Set(HeaderRetryAfter, strconv.FormatInt(p.RetryAfter, 10))
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	// A refusal depends on the moment: no cache may replay it.
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}
