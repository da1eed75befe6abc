package failpoint

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	p, err := Parse("crossgroup-cancel-part=crash-after-50ms@0.01, raftlog-after-append=error,raftlog-before-append=sleep-2ms")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]action{
		CancelPart:      {kind: "crash", after: 50 * time.Millisecond, chance: 0.01},
		LogAppendAfter:  {kind: "error", chance: 1},
		LogAppendBefore: {kind: "sleep", after: 2 * time.Millisecond, chance: 1},
	}
	for k, v := range want {
		if p.armed[k] != v {
			t.Errorf("%s: %+v, want %+v", k, p.armed[k], v)
		}
	}
	for _, bad := range []string{"nosuch=crash", "raftlog-after-append", "raftlog-after-append=explode",
		"raftlog-after-append=crash@2", "raftlog-after-append=sleep-x", "raftlog-after-append=crash-after-0s"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v, want ErrSpec", bad, err)
		}
	}
}

// A nil Points injects nothing; an armed error point fires, a point not
// armed does not; a sleep sleeps.
func TestHit(t *testing.T) {
	var none *Points
	if err := none.Hit(LogAppendAfter); err != nil {
		t.Fatal(err)
	}
	p, _ := Parse("raftlog-after-append=error,raftlog-before-append=sleep-20ms")
	if err := p.Hit(LogAppendAfter); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed error: %v", err)
	}
	if err := p.Hit(CancelPart); err != nil {
		t.Fatalf("not armed: %v", err)
	}
	start := time.Now()
	if err := p.Hit(LogAppendBefore); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("sleep: %v after %v", err, time.Since(start))
	}
}

// A crash point kills the process as kill -9 does (run in a child
// process of the test binary); crash-after lets the rest of the process
// run a moment, never the caller.
func TestCrash(t *testing.T) {
	if os.Getenv("FAILPOINT_CRASH_CHILD") == "1" {
		p, _ := Parse("crossgroup-cancel-part=crash-after-100ms")
		go func() {
			time.Sleep(time.Millisecond)
			fmt.Println("meanwhile")
		}()
		p.Hit(CancelPart)
		fmt.Println("after the point")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CRASH_CHILD=1")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child: %v, want killed by SIGKILL", err)
	}
	if !strings.Contains(string(out), "meanwhile") || strings.Contains(string(out), "after the point") {
		t.Fatalf("crash-after: %q, want what ran beside it and not the caller", out)
	}
}

// An offset point reads its file each time: nothing while it is missing,
// empty or not a duration, the duration it holds otherwise; a point not
// armed, or armed with another action, has none.
func TestOffset(t *testing.T) {
	file := t.TempDir() + "/offset"
	p, err := Parse("wall-clock=offset-from-" + file + ",raftlog-write=error")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Armed(WallClock) || p.Armed(CancelPart) || (*Points)(nil).Armed(WallClock) {
		t.Fatal("Armed")
	}
	if d := p.Offset(WallClock); d != 0 {
		t.Fatalf("no file: %v", d)
	}
	for content, want := range map[string]time.Duration{"90s\n": 90 * time.Second, "-5m": -5 * time.Minute, "": 0, "soon": 0} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if d := p.Offset(WallClock); d != want {
			t.Errorf("%q: %v, want %v", content, d, want)
		}
	}
	if d := p.Offset(LogWrite); d != 0 {
		t.Fatalf("an error point's offset: %v", d)
	}
	if _, err := Parse("wall-clock=offset-from-"); !errors.Is(err, ErrSpec) {
		t.Fatalf("an offset with no file: %v", err)
	}
}

// append-to-<file> arms a point that injects nothing and names its file;
// other points, and a nil Points, name none.
func TestAppendTo(t *testing.T) {
	p, err := Parse("apply-trace=append-to-/tmp/trace,raftlog-write=error")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.AppendTo(ApplyTrace); got != "/tmp/trace" {
		t.Fatalf("AppendTo: %q", got)
	}
	if err := p.Hit(ApplyTrace); err != nil {
		t.Fatalf("a trace point injected %v", err)
	}
	var none *Points
	if p.AppendTo(LogWrite) != "" || none.AppendTo(ApplyTrace) != "" {
		t.Fatal("a file for a point not armed to append")
	}
	if _, err := Parse("apply-trace=append-to-"); !errors.Is(err, ErrSpec) {
		t.Fatalf("no file: %v", err)
	}
}
