package resp

import (
	"errors"
	"reflect"
	"testing"
)

// Replies the writer makes read back as go-redis would read them; cut or
// broken replies are errors, never a panic.
func TestDecodeReply(t *testing.T) {
	var w Writer
	w.Array(4)
	w.Int(-7)
	w.BulkString("a\r\nb")
	w.Null()
	w.Array(2)
	w.Error("ERR inner")
	w.Simple("OK")
	v, err := DecodeReply(w.Buf)
	want := []any{int64(-7), "a\r\nb", nil, []any{ReplyError("ERR inner"), "OK"}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("%#v %v", v, err)
	}
	if _, err := DecodeReply([]byte("-MOVED 1 a:1\r\n")); err.Error() != "MOVED 1 a:1" {
		t.Fatalf("error reply: %v", err)
	}
	if _, err := DecodeReply([]byte("$-1\r\n")); !errors.Is(err, ErrNull) {
		t.Fatalf("null: %v", err)
	}
	for i := range len(w.Buf) {
		if _, err := DecodeReply(w.Buf[:i]); err == nil {
			t.Fatalf("a reply cut at %d read whole", i)
		}
	}
	for _, bad := range []string{"", "x\r\n", ":a\r\n", "$5\r\nab\r\n", "*99999999999\r\n", "*1\r\n", "+OK\r\n+OK\r\n"} {
		if _, err := DecodeReply([]byte(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}
