// Package errlint holds a lint of the tree, as pebble lints its errors:
// no code reads an error's text, a RESP reply's first byte, or a reply
// decoded (resp.DecodeReply) to decide what happened. Between members
// and inside the server, what went wrong is a sentinel (errors.Is) or a
// typed code; text is for people, and for the RESP door's replies.
//
// It is a ratchet: the places that still match text are listed in
// knownTextMatches, each to be replaced by a typed code (issue #56); the
// test fails on a new one, and on a listed file that has fewer than
// listed (lower the count).
package errlint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// knownTextMatches are the files that still match error text, with how
// many times. Every one is a door shaping text for its protocol (a
// package's prefix left out of a reply or a gRPC status's message, Redis'
// EXECABORT line) or a client reading a reply; none decides by it. Code
// behind the doors has none.
var knownTextMatches = map[string]int{
	"commands/migrations.go": 2, // slotmove's errors turned into replies
	"commands/tx.go":         1, // EXECABORT's text built from a queued error's
	"rls/service.go":         3, // a status message without the RESP code word; the door's own prefixes
	"server/guard/errors.go": 1, // the guard's prefix stripped for the reply
	"server/persist.go":      1, // persist's prefix stripped for a log line
	// Decoding a reply is a client's: these two are clients.
	"member/legacy.go": 1, // a 0.4.0 member's Apply reply, during a rolling upgrade (goes with the next release)
	"shardsim/sim.go":  1, // the simulation's clients
}

// textFuncs are the strings functions that read text by its content.
var textFuncs = map[string]bool{"HasPrefix": true, "HasSuffix": true, "TrimPrefix": true, "TrimSuffix": true,
	"CutPrefix": true, "CutSuffix": true, "Contains": true, "Index": true, "EqualFold": true}

// replyPrefixes start RESP error replies: matching them reads a reply's
// text.
var replyPrefixes = []string{"ERR ", "ERR", "WRONGTYPE", "OOM ", "LOADING", "TRYAGAIN", "MOVED", "ASK ", "CLUSTERDOWN", "NOAUTH", "READONLY", "EXECABORT"}

func TestNoCodeMatchesErrorText(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "tests", "scripts", "internal/errlint", "memberpb", "bin", "third_party":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && readsReplyByte(b) {
				found[filepath.ToSlash(rel)] = append(found[filepath.ToSlash(rel)], fset.Position(b.Pos()).String())
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if decodesReply(call) {
				found[filepath.ToSlash(rel)] = append(found[filepath.ToSlash(rel)], fset.Position(call.Pos()).String())
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !textFuncs[sel.Sel.Name] {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "strings" {
				return true
			}
			for _, arg := range call.Args {
				if readsErrorText(arg) {
					found[filepath.ToSlash(rel)] = append(found[filepath.ToSlash(rel)], fset.Position(call.Pos()).String())
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(found))
	for f := range found {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if len(found[f]) > knownTextMatches[f] {
			t.Errorf("%s matches error text %d times (%d known): use a sentinel or a typed code\n\t%s",
				f, len(found[f]), knownTextMatches[f], strings.Join(found[f], "\n\t"))
		}
	}
	for f, n := range knownTextMatches {
		if len(found[f]) < n {
			t.Errorf("%s matches error text %d times, %d listed: lower knownTextMatches", f, len(found[f]), n)
		}
	}
}

// readsReplyByte reports whether b compares a reply's first byte with a
// RESP type byte (reply[0] == '-'): reading a RESP reply to learn what it
// says.
func readsReplyByte(b *ast.BinaryExpr) bool {
	if b.Op != token.EQL && b.Op != token.NEQ {
		return false
	}
	for _, pair := range [][2]ast.Expr{{b.X, b.Y}, {b.Y, b.X}} {
		ix, ok := pair[0].(*ast.IndexExpr)
		lit, isLit := pair[1].(*ast.BasicLit)
		if !ok || !isLit || lit.Kind != token.CHAR || !strings.Contains(`'-' '$' '_' '*' ':' '+'`, lit.Value) {
			continue
		}
		if i, ok := ix.Index.(*ast.BasicLit); !ok || i.Value != "0" {
			continue
		}
		name := strings.ToLower(exprName(ix.X))
		if strings.Contains(name, "reply") || strings.HasSuffix(name, "buf") {
			return true
		}
	}
	return false
}

// decodesReply reports whether call is resp.DecodeReply: reading a RESP
// reply as a client does.
func decodesReply(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "DecodeReply" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "resp"
}

// exprName is the last name in x (reply, s.w.Buf → Buf).
func exprName(x ast.Expr) string {
	switch v := x.(type) {
	case *ast.Ident:
		return v.Name
	case *ast.SelectorExpr:
		return v.Sel.Name
	}
	return ""
}

// readsErrorText reports whether e is an error's text (x.Error()) or a
// literal that starts a RESP error reply.
func readsErrorText(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.CallExpr:
		if sel, ok := v.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Error" && len(v.Args) == 0 {
			return true
		}
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(v.Value)
		if err != nil {
			return false
		}
		for _, p := range replyPrefixes {
			if strings.HasPrefix(s, p) {
				return true
			}
		}
	case *ast.BinaryExpr:
		return readsErrorText(v.X) || readsErrorText(v.Y)
	}
	return false
}
