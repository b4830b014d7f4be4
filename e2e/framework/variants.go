package framework

// Variants of the operator: the product's source with a few lines changed,
// built with `go build -overlay`, so that the files on disk stay as they are
// and the product holds no test-only switch for a learner to copy. The chaos
// suite's mutants and the benchmarks' ablation are variants.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Edit is one change of a file of the product (at the repository's root): From,
// which the file must hold exactly once, becomes To.
type Edit struct {
	File, From, To string
}

// BuildVariant builds the operator with edits into dir, under name, and
// returns the binary. It fails the test if a From is not in its file once:
// a variant must follow the code it changes.
func (s *Suite) BuildVariant(t testing.TB, dir, name string, edits ...Edit) string {
	t.Helper()
	binary, err := buildVariant(s.Root, dir, name, edits...)
	if err != nil {
		t.Fatal(err)
	}
	return binary
}

func buildVariant(root, dir, name string, edits ...Edit) (string, error) {
	overlayFile, err := overlay(root, dir, name, edits...)
	if err != nil {
		return "", err
	}
	binary := strings.TrimSuffix(overlayFile, ".json")
	build := exec.Command("go", "build", "-overlay", overlayFile, "-o", binary, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building variant %q: %w\n%s", name, err, out)
	}
	return binary, nil
}

// overlay writes the files of the repository at root with edits, and go
// build's overlay of them, into dir, and returns the overlay's file.
func overlay(root, dir, name string, edits ...Edit) (string, error) {
	slug := regexp.MustCompile(`\W+`).ReplaceAllString(name, "-")
	changed := map[string]string{} // file -> its text with the edits so far
	for _, e := range edits {
		text, ok := changed[e.File]
		if !ok {
			src, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				return "", err
			}
			text = string(src)
		}
		if n := strings.Count(text, e.From); n != 1 {
			return "", fmt.Errorf("variant %q: %s holds %q %d times, not once: change the variant with the code", name, e.File, e.From, n)
		}
		changed[e.File] = strings.Replace(text, e.From, e.To, 1)
	}
	replace := map[string]string{}
	for file, text := range changed {
		path := filepath.Join(dir, slug+"-"+strings.ReplaceAll(file, "/", "-"))
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return "", err
		}
		replace[filepath.Join(root, file)] = path
	}
	data, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(dir, slug+".json")
	if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
		return "", err
	}
	return overlayFile, nil
}

// String names an edit for a report: file: `from` → `to`.
func (e Edit) String() string {
	return fmt.Sprintf("%s: `%s` → `%s`", e.File, e.From, e.To)
}
