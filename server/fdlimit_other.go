//go:build !unix

package server

// fitOpenFiles: no descriptor limit to fit here.
func fitOpenFiles(want uint64) (soft, hard uint64, err error) { return want, want, nil }

func isFDExhausted(error) bool { return false }

type reserveFD struct{}

func openReserveFD() reserveFD { return reserveFD{} }

func (reserveFD) Close() bool { return false }
