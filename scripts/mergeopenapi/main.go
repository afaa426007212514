// Command mergeopenapi folds the per-file Swagger 2.0 documents that
// protoc-gen-swagger writes into one OpenAPI document for the whole chain's
// REST surface, so integrators get a single file.
package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type swaggerDoc struct {
	Paths       map[string]json.RawMessage `json:"paths"`
	Definitions map[string]json.RawMessage `json:"definitions"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mergeopenapi <dir of *.swagger.json> <out.json>")
		os.Exit(2)
	}
	if err := merge(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mergeopenapi:", err)
		os.Exit(1)
	}
}

func merge(dir, out string) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".swagger.json") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	paths := map[string]json.RawMessage{}
	defs := map[string]json.RawMessage{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var doc swaggerDoc
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for k, v := range doc.Paths {
			paths[k] = v
		}
		for k, v := range doc.Definitions {
			defs[k] = v
		}
	}
	merged := map[string]any{
		"swagger": "2.0",
		"info": map[string]string{
			"title":       "depinchain REST API",
			"description": "gRPC-gateway routes of the depinchain modules (x/market, x/stakingext, x/verify, x/shardregistry).",
			"version":     "v1",
		},
		"consumes":    []string{"application/json"},
		"produces":    []string{"application/json"},
		"paths":       paths,
		"definitions": defs,
	}
	body, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, append(body, '\n'), 0o644)
}
