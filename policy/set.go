package policy

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Set is every domain the server enforces. It is immutable once built: a
// reload builds a new Set and swaps it in whole (one pointer), so a check
// sees either the old rules or the new ones, never a mix.
type Set struct {
	domains map[string]*Domain
	names   []string // sorted, for deterministic iteration
}

// NewSet combines domains; two with one name are an error naming both
// files (envoy refuses them too unless told to merge).
func NewSet(domains ...*Domain) (*Set, error) {
	s := &Set{domains: make(map[string]*Domain, len(domains))}
	for _, d := range domains {
		if prev, dup := s.domains[d.Name]; dup {
			return nil, &Error{File: d.File, Problem: fmt.Sprintf("domain %q is already defined in %s", d.Name, prev.File), Err: ErrDuplicateDomain}
		}
		s.domains[d.Name] = d
		s.names = append(s.names, d.Name)
	}
	sort.Strings(s.names)
	return s, nil
}

// Domain returns the named domain, or nil: a request in an unknown domain
// is not limited.
func (s *Set) Domain(name string) *Domain {
	if s == nil {
		return nil
	}
	return s.domains[name]
}

// Domains lists the domain names in sorted order.
func (s *Set) Domains() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.names...)
}

// Match looks up the rule for one descriptor of a domain (nil: not limited).
// A nil Set has no domains.
func (s *Set) Match(domain string, entries []Entry) *Rule {
	d := s.Domain(domain)
	if d == nil {
		return nil
	}
	return d.Match(entries)
}

// LoadFiles parses the named files, one domain each, with DefaultLimits.
func LoadFiles(paths ...string) (*Set, error) { return DefaultLimits().LoadFiles(paths...) }

// LoadDir parses every *.yaml and *.yml file directly in dir (not in
// subdirectories, not dotfiles), in name order, with DefaultLimits.
func LoadDir(dir string) (*Set, error) { return DefaultLimits().LoadDir(dir) }

// LoadFiles parses the named files within l.
func (l Limits) LoadFiles(paths ...string) (*Set, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	domains := make([]*Domain, 0, len(paths))
	for _, path := range paths {
		data, err := l.read(path)
		if err != nil {
			return nil, err
		}
		d, err := l.Parse(path, data)
		if err != nil {
			return nil, err
		}
		domains = append(domains, d)
	}
	return NewSet(domains...)
}

// LoadDir parses the rule files of dir within l.
func (l Limits) LoadDir(dir string) (*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &Error{File: dir, Problem: err.Error(), Err: ErrRead}
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			paths = append(paths, filepath.Join(dir, name))
		}
	}
	return l.LoadFiles(paths...)
}

// read reads a file, stopping one byte past the limit so a huge file is
// never held in memory.
func (l Limits) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Problem: err.Error(), Err: ErrRead}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(l.MaxFileBytes)+1))
	if err != nil {
		return nil, &Error{File: path, Problem: err.Error(), Err: ErrRead}
	}
	if len(data) > l.MaxFileBytes {
		return nil, &Error{File: path, Problem: fmt.Sprintf("file is more than the %d bytes allowed", l.MaxFileBytes), Err: ErrTooLarge}
	}
	return data, nil
}
