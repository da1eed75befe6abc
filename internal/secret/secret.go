// Package secret compares a password a client sent with the configured one
// without telling either away through timing: both are hashed first, so
// the comparison takes the same time whatever their lengths and contents.
// Every front door (AUTH, the rate limit service, the status page) uses it.
package secret

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Equal reports whether got is the password want.
func Equal(want, got string) bool {
	w := sha256.Sum256([]byte(want))
	g := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(w[:], g[:]) == 1
}
