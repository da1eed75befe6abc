// Package memsize reads memory sizes as redis.conf writes them.
package memsize

import (
	"strconv"
	"strings"
)

// Parse reads a memory size as redis.conf writes one: bytes, or a
// number with k, kb, m, mb, g or gb (k = 1000, kb = 1024, as Redis).
func Parse(s string) (int64, bool) {
	v := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}
