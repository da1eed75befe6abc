package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/commands"
	"github.com/sluice-rl/sluice/machine"
	"github.com/sluice-rl/sluice/resp"
)

// Rule files (--rules) are configuration read from disk, but what RL.CHECK
// enforces is state: the files' bytes go through the state machine as an
// RL.RULES LOAD-FILES command, like any change, so a restart, a snapshot
// and every replica see exactly the rules that were applied. The server
// reads the files at start (a bad file stops startup before the data
// directory is touched), on SIGHUP and when a file changes; a reload that
// does not parse is logged and counted and the old rules stay. A SIGHUP or
// a changed file applies them; at start, and on a replicated leader every
// second, they are applied only when they are not the files the applied
// rules last loaded — so RL.RULES CLEAR and a client's RL.RULES LOAD stay
// until the files change or are reloaded, alike on one node and on many.
// On a replicated node only the serving leader applies its files: keep the
// same files on every node.

// ErrRules is a rule file that cannot be read or does not parse.
var ErrRules = errors.New("server: rules")

// maxRuleFileBytes bounds one rule file (envoy files are a few KB).
const maxRuleFileBytes = 1 << 20

// reloadDebounce gathers the events of one save (editors write, rename and
// chmod) into one reload.
const reloadDebounce = 200 * time.Millisecond

// rulesState is the server's side of the rule files.
type rulesState struct {
	paths []string
	mu    sync.Mutex
	// files is the last set read that parsed: what this node enforces.
	files []machine.RuleFile
	// reloads and failures count reloads, for metrics; syncs counts a
	// serving leader's checks of its files against the applied rules.
	reloads, failures, syncs atomic.Int64
}

// readRuleFiles reads paths: each a file, or a directory whose *.yaml and
// *.yml files (no dotfiles, no subdirectories) are read in name order.
func readRuleFiles(paths []string) ([]machine.RuleFile, error) {
	var files []machine.RuleFile
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRules, err)
		}
		names := []string{p}
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrRules, err)
			}
			names = names[:0]
			for _, e := range entries {
				ext := filepath.Ext(e.Name())
				if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") && (ext == ".yaml" || ext == ".yml") {
					names = append(names, filepath.Join(p, e.Name()))
				}
			}
			slices.Sort(names)
		}
		for _, name := range names {
			src, err := readBounded(name)
			if err != nil {
				return nil, err
			}
			files = append(files, machine.RuleFile{Name: name, Source: src})
		}
	}
	return files, nil
}

func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRules, err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, maxRuleFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRules, name, err)
	}
	if len(src) > maxRuleFileBytes {
		return nil, fmt.Errorf("%w: %s: more than the %d bytes a rule file may hold", ErrRules, name, maxRuleFileBytes)
	}
	return src, nil
}

// readRules reads and parses the configured files.
func (r *rulesState) read() ([]machine.RuleFile, error) {
	files, err := readRuleFiles(r.paths)
	if err != nil {
		return nil, err
	}
	if _, err := machine.ParseRules(files); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRules, err)
	}
	return files, nil
}

// loadArgs is the RL.RULES LOAD-FILES command for the server's files.
func loadArgs(files []machine.RuleFile) [][]byte {
	args := [][]byte{[]byte("RL.RULES"), []byte("LOAD-FILES")}
	for _, f := range files {
		args = append(args, []byte(f.Name), f.Source)
	}
	return args
}

// readRulesAtStart reads the rule files before anything else is done at
// startup: a file that does not parse stops the server, naming file, line
// and problem, before the data directory is touched.
func (s *Server) readRulesAtStart() error {
	if len(s.cfg.Rules) == 0 {
		return nil
	}
	s.rules = &rulesState{paths: s.cfg.Rules}
	files, err := s.rules.read()
	if err != nil {
		return err
	}
	s.rules.files = files
	return nil
}

// startRules applies the files read at start once the state is loaded,
// unless the applied rules already came from these very files (a CLEAR or
// a client's load made since stays); a replicated node leaves it to the
// leader once it serves (syncRules).
func (s *Server) startRules() error {
	if s.rules == nil || s.node != nil || s.filesApplied() {
		return nil
	}
	return s.applyRules(s.rules.files)
}

// filesApplied reports whether the server's files, as last read, are the
// ones the applied rules last loaded (by their digest).
func (s *Server) filesApplied() bool {
	st := s.env.Machine.Rules()
	if st == nil {
		return len(s.rules.files) == 0
	}
	return st.FilesDigest == machine.FilesDigestOf(s.rules.files)
}

// ReloadRules reads the rule files again and applies them; on error the
// rules in force stay, and the error is logged and counted.
func (s *Server) ReloadRules() error {
	if s.rules == nil {
		return nil
	}
	s.rules.mu.Lock()
	defer s.rules.mu.Unlock()
	files, err := s.rules.read()
	if err == nil {
		s.rules.files = files
		if s.node == nil {
			err = s.applyRules(files)
		} else if s.node.Serving() {
			err = s.applyRules(files)
		}
	}
	if err != nil {
		s.rules.failures.Add(1)
		s.log.Error("rules not reloaded; the previous rules stay in force", "err", err)
		return err
	}
	s.rules.reloads.Add(1)
	s.log.Info("rules reloaded", "files", len(files))
	return nil
}

// applyRules applies RL.RULES LOAD for files through the state machine
// (or, replicated, through the log).
func (s *Server) applyRules(files []machine.RuleFile) error {
	args := loadArgs(files)
	var reply []byte
	if s.node == nil {
		var w resp.Writer
		s.env.Machine.ApplyArgs(s.env.Clock.Now(), args, &w)
		reply = w.Buf
	} else {
		get, err := commands.Replicated{Node: s.node}.ApplyAll([][][]byte{args})
		if err != nil {
			return fmt.Errorf("%w: %w", ErrRules, err)
		}
		reply, _ = get(0)
	}
	if string(reply) != "+OK\r\n" {
		return fmt.Errorf("%w: %s", ErrRules, strings.TrimSpace(strings.TrimPrefix(string(reply), "-")))
	}
	return nil
}

// syncRules, on a serving leader, applies this node's files when they are
// not the files the applied rules last loaded (after an election, or a
// reload this node made while following). A CLEAR or a client's load does
// not change which files were last loaded, so it stays.
func (s *Server) syncRules() {
	if s.rules == nil || s.node == nil || !s.node.Serving() {
		return
	}
	s.rules.mu.Lock()
	defer s.rules.mu.Unlock()
	defer s.rules.syncs.Add(1)
	if s.filesApplied() {
		return
	}
	if err := s.applyRules(s.rules.files); err != nil {
		s.log.Warn("rules not applied yet", "err", err)
	}
}

// watchRules reloads when a rule file changes. It watches the
// directories (an editor's save often replaces the file by a rename),
// and on a replicated node also keeps the leader's rules applied.
func (s *Server) watchRules() {
	defer s.bg.Done()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("rule files are not watched; reload with SIGHUP", "err", err)
	} else {
		defer w.Close()
		for _, p := range s.rules.paths {
			dir := p
			if info, err := os.Stat(p); err == nil && !info.IsDir() {
				dir = filepath.Dir(p)
			}
			if err := w.Add(dir); err != nil {
				s.log.Warn("rule files are not watched; reload with SIGHUP", "path", dir, "err", err)
			}
		}
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-s.stop:
			return
		case ev := <-events:
			if s.watched(ev.Name) {
				debounce = time.After(reloadDebounce)
			}
		case err := <-errs:
			s.log.Warn("watching rule files", "err", err)
		case <-debounce:
			debounce = nil
			s.ReloadRules()
		case <-tick.C:
			s.syncRules()
		}
	}
}

// watched reports whether an event on name concerns a rule file.
func (s *Server) watched(name string) bool {
	name = filepath.Clean(name)
	for _, p := range s.rules.paths {
		p = filepath.Clean(p)
		switch {
		case name == p:
			return true
		case filepath.Base(name) == configMapData && (filepath.Dir(name) == p || filepath.Dir(name) == filepath.Dir(p)):
			// A mounted directory, or the one a mounted file is in.
			return true
		case filepath.Dir(name) == p:
			ext := filepath.Ext(name)
			return ext == ".yaml" || ext == ".yml"
		}
	}
	return false
}

// configMapData is the symlink a Kubernetes ConfigMap (or Secret) volume
// reaches its files through: the kubelet changes them all at once by
// renaming a new symlink over it, and no event names the files, which
// are symlinks through it.
const configMapData = "..data"

// rulesCollectors are the reload counters, for the metrics registry.
func (s *Server) rulesCollectors() []prometheus.Collector {
	if s.rules == nil {
		return nil
	}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_rules_sync_checks_total",
			Help: "A replicated leader's checks (each second) that the applied rules last loaded its files."},
			func() float64 { return float64(s.rules.syncs.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_rules_reloads_total",
			Help: "Rule file reloads that took effect."}, func() float64 { return float64(s.rules.reloads.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_rules_reload_failures_total",
			Help: "Rule file reloads refused (a file that does not read or parse); the previous rules stayed."},
			func() float64 { return float64(s.rules.failures.Load()) }),
	}
}
