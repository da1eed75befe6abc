package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse reads one rule file in envoyproxy/ratelimit's format (plus the
// sluice extension, see the package doc) with DefaultLimits. name is used in
// errors only.
func Parse(name string, data []byte) (*Domain, error) {
	return DefaultLimits().Parse(name, data)
}

// Parse reads one rule file within the limits l. Every error is an *Error
// naming name, the line and the problem.
func (l Limits) Parse(name string, data []byte) (*Domain, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	p := &parser{file: name, lim: l}
	if len(data) > l.MaxFileBytes {
		return nil, p.fail(0, ErrTooLarge, "file is %d bytes, more than the %d allowed", len(data), l.MaxFileBytes)
	}
	root, err := p.document(data)
	if err != nil {
		return nil, err
	}
	if err := p.check(root, 1); err != nil {
		return nil, err
	}
	return p.domain(root)
}

type parser struct {
	file  string
	lim   Limits
	rules int
	dom   *Domain
}

func (p *parser) fail(line int, sentinel error, format string, args ...any) error {
	return &Error{File: p.file, Line: line, Problem: fmt.Sprintf(format, args...), Err: sentinel}
}

// yamlLine finds the line in the yaml package's error text ("yaml: line 3:
// …"), which has no structured form.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// document decodes exactly one YAML document and returns its top node.
func (p *parser) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.fail(0, ErrInvalid, "empty file: want a mapping with domain and descriptors")
		}
		return nil, p.yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlError(err)
		}
		return nil, p.fail(extra.Line, ErrSyntax, "a second YAML document; a file holds one domain")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, p.fail(doc.Line, ErrSyntax, "not a YAML document")
	}
	return doc.Content[0], nil
}

func (p *parser) yamlError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return p.fail(line, ErrSyntax, "%s", strings.TrimPrefix(msg, m[0]))
	}
	return p.fail(0, ErrSyntax, "%s", strings.TrimPrefix(msg, "yaml: "))
}

// check walks every node once before anything is interpreted: it bounds
// the depth, and refuses aliases (which could expand exponentially), merge
// keys, non-scalar mapping keys and duplicate keys, anywhere in the file
// (metadata included).
func (p *parser) check(n *yaml.Node, depth int) error {
	if depth > p.lim.MaxYAMLDepth {
		return p.fail(n.Line, ErrTooDeep, "YAML nested deeper than %d levels", p.lim.MaxYAMLDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return p.fail(n.Line, ErrSyntax, "YAML aliases (*%s) are not supported", n.Value)
	case yaml.MappingNode:
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return p.fail(k.Line, ErrSyntax, "mapping keys must be plain scalars")
			}
			if k.Tag == "!!merge" {
				return p.fail(k.Line, ErrSyntax, "YAML merge keys (<<) are not supported")
			}
			if first, dup := seen[k.Value]; dup {
				return p.fail(k.Line, ErrDuplicateKey, "duplicate key %q (first on line %d)", k.Value, first)
			}
			seen[k.Value] = k.Line
			if err := p.check(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if err := p.check(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// field is one key/value pair of a mapping.
type field struct {
	key   *yaml.Node
	value *yaml.Node
}

// fields returns the pairs of mapping n, refusing any key not in allowed.
func (p *parser) fields(n *yaml.Node, what string, allowed ...string) (map[string]field, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.fail(n.Line, ErrInvalid, "%s must be a mapping", what)
	}
	out := make(map[string]field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		known := false
		for _, a := range allowed {
			if k.Value == a {
				known = true
				break
			}
		}
		if !known {
			return nil, p.fail(k.Line, ErrUnknownField, "unknown field %q in %s (known: %s)",
				k.Value, what, strings.Join(allowed, ", "))
		}
		out[k.Value] = field{key: k, value: n.Content[i+1]}
	}
	return out, nil
}

// text is a scalar's text; null (or an absent field) is "".
func (p *parser) text(f field, what string) (string, error) {
	if f.value == nil || f.value.Tag == "!!null" {
		return "", nil
	}
	if f.value.Kind != yaml.ScalarNode {
		return "", p.fail(f.value.Line, ErrInvalid, "%s must be a string", what)
	}
	return f.value.Value, nil
}

// boolean reads a bool field; absent is false. YAML 1.1 spellings (yes, on)
// are accepted as envoy's YAML library accepts them.
func (p *parser) boolean(f field, what string) (bool, error) {
	if f.value == nil {
		return false, nil
	}
	var b bool
	if f.value.Kind != yaml.ScalarNode || f.value.Decode(&b) != nil {
		return false, p.fail(f.value.Line, ErrInvalid, "%s must be true or false, not %q", what, f.value.Value)
	}
	return b, nil
}

// integer reads an integer field in [lo, hi].
func (p *parser) integer(f field, what string, lo, hi int64) (int64, error) {
	var v int64
	if f.value.Kind != yaml.ScalarNode || f.value.Tag != "!!int" || f.value.Decode(&v) != nil {
		return 0, p.fail(f.value.Line, ErrInvalid, "%s must be an integer, not %q", what, f.value.Value)
	}
	if v < lo || v > hi {
		return 0, p.fail(f.value.Line, ErrInvalid, "%s must be in [%d, %d], not %d", what, lo, hi, v)
	}
	return v, nil
}

// domain interprets the top-level mapping.
func (p *parser) domain(root *yaml.Node) (*Domain, error) {
	fs, err := p.fields(root, "the top level", "domain", "descriptors", "sluice")
	if err != nil {
		return nil, err
	}
	f, ok := fs["domain"]
	if !ok {
		return nil, p.fail(root.Line, ErrInvalid, "domain is required")
	}
	name, err := p.text(f, "domain")
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, p.fail(f.key.Line, ErrInvalid, "domain must not be empty")
	}
	p.dom = &Domain{Name: name, File: p.file}
	if x, ok := fs["sluice"]; ok {
		if err := p.domainExtension(x.value); err != nil {
			return nil, err
		}
	}
	if d, ok := fs["descriptors"]; ok {
		if err := p.descriptors(&p.dom.root, d.value, nil); err != nil {
			return nil, err
		}
	}
	return p.dom, nil
}

// domainExtension reads the domain-level sluice extension:
//
//	sluice: {shard_key: tenant}
func (p *parser) domainExtension(n *yaml.Node) error {
	fs, err := p.fields(n, "the domain's sluice block", "shard_key")
	if err != nil {
		return err
	}
	if f, ok := fs["shard_key"]; ok {
		key, err := p.text(f, "shard_key")
		if err != nil {
			return err
		}
		if key == "" {
			return p.fail(f.key.Line, ErrInvalid, "shard_key must name a descriptor key")
		}
		p.dom.ShardKey = key
	}
	return nil
}

// level is what the path to a descriptor contributes to its rule.
type level struct {
	path   string // "key=value" or "key"
	shared string // share_threshold pattern or ""
}

var descriptorFields = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode",
	"quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata"}

// descriptors reads a descriptor list into parent's children. path is the
// levels above it.
func (p *parser) descriptors(parent *node, list *yaml.Node, path []level) error {
	if list.Tag == "!!null" {
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		return p.fail(list.Line, ErrInvalid, "descriptors must be a list")
	}
	if len(path) >= p.lim.MaxDepth && len(list.Content) > 0 {
		return p.fail(list.Content[0].Line, ErrTooDeep, "descriptors nested deeper than %d levels", p.lim.MaxDepth)
	}
	type sibling struct {
		key, value string
		hasValue   bool
	}
	seen := make(map[sibling]int, len(list.Content))
	for _, item := range list.Content {
		fs, err := p.fields(item, "a descriptor", descriptorFields...)
		if err != nil {
			return err
		}
		key, err := p.text(fs["key"], "key")
		if err != nil {
			return err
		}
		if key == "" {
			return p.fail(item.Line, ErrInvalid, "descriptor has no key")
		}
		value, err := p.text(fs["value"], "value")
		if err != nil {
			return err
		}
		sib := sibling{key, value, value != ""}
		if first, dup := seen[sib]; dup {
			return p.fail(item.Line, ErrDuplicateDescriptor, "duplicate descriptor %s (first on line %d)",
				describe(key, value), first)
		}
		seen[sib] = item.Line

		var flags [5]bool
		for i, name := range []string{"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold"} {
			if flags[i], err = p.boolean(fs[name], name); err != nil {
				return err
			}
		}
		shareThreshold := flags[4]
		wild := strings.Contains(value, "*")
		if shareThreshold && !wild {
			return p.fail(fs["share_threshold"].key.Line, ErrInvalid,
				"share_threshold needs a wildcard value (one containing '*')")
		}

		child := &node{}
		lv := level{path: describe(key, value)}
		if shareThreshold {
			lv.shared = value
		}
		here := append(path[:len(path):len(path)], lv)

		if rl, ok := fs["rate_limit"]; ok && rl.value.Tag != "!!null" {
			r, err := p.rateLimit(rl.value, here, item.Line)
			if err != nil {
				return err
			}
			r.ShadowMode, r.QuotaMode, r.DetailedMetric, r.ValueToMetric = flags[0], flags[1], flags[2], flags[3]
			child.rule = r
			p.dom.Rules = append(p.dom.Rules, r)
		}
		if sub, ok := fs["descriptors"]; ok {
			if err := p.descriptors(child, sub.value, here); err != nil {
				return err
			}
		}

		switch {
		case wild:
			if parent.wild == nil {
				parent.wild = make(map[string][]wildcard)
			}
			parent.wild[key] = append(parent.wild[key], wildcard{
				pattern: value, parts: strings.Split(value, "*"), shared: shareThreshold, next: child,
			})
		case value != "":
			if parent.exact == nil {
				parent.exact = make(map[pair]*node)
			}
			parent.exact[pair{key, value}] = child
		default:
			if parent.anyVal == nil {
				parent.anyVal = make(map[string]*node)
			}
			parent.anyVal[key] = child
		}
	}
	return nil
}

func describe(key, value string) string {
	if value == "" {
		return key
	}
	return key + "=" + value
}
