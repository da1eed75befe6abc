package httplimit

import (
	"net"
	"net/http"
)

// RemoteAddr keys each request by prefix + the host of its connection's
// remote address. It trusts no header (X-Forwarded-For is the client's to
// forge); behind a proxy, write a KeyFunc that reads the address your
// proxy sets. A request without a remote address is not limited.
func RemoteAddr(prefix string) KeyFunc {
	return func(r *http.Request) string {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		if host == "" {
			return ""
		}
		return prefix + host
	}
}
