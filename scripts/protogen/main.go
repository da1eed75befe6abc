// Command protogen compiles the project's .proto files and writes their Go
// code beside them, as protoc with protoc-gen-go would, with no protoc: a
// pure-Go compiler (bufbuild/protocompile) and protoc-gen-go's own
// generator. It is a module of its own so the server does not depend on
// either.
//
//	go run . ../../memberpb/member.proto
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: protogen file.proto …")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := generate(path); err != nil {
			fmt.Fprintln(os.Stderr, "protogen:", err)
			os.Exit(1)
		}
	}
}

func generate(path string) error {
	dir, name := filepath.Split(path)
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{dir}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		return err
	}
	var protos []*descriptorpb.FileDescriptorProto
	for _, f := range files {
		protos = append(protos, protodesc.ToFileDescriptorProto(f))
	}
	param := "paths=source_relative"
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: []string{name}, ProtoFile: protos, Parameter: &param}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return err
	}
	for _, f := range gen.Files {
		if f.Generate {
			internal_gengo.GenerateFile(gen, f)
		}
	}
	res := gen.Response()
	if res.Error != nil {
		return fmt.Errorf("%s: %s", path, res.GetError())
	}
	for _, out := range res.File {
		if err := os.WriteFile(filepath.Join(dir, out.GetName()), []byte(out.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
