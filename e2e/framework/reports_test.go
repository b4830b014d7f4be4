package framework

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The reports committed at the repository's root are as their runs wrote
// them: a hand edit of a generated block is caught here, in make test.
func TestReportsAsWritten(t *testing.T) {
	for _, file := range []string{"RELIABILITY.md", "BENCHMARKS.md"} {
		text, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(text), " begins -->"); n == 0 {
			t.Errorf("%s holds no written report", file)
		}
		if edited := CheckDigests(string(text)); len(edited) > 0 {
			t.Errorf("%s: the written reports %v are not as their runs wrote them (their digest does not match): run them again (make chaos, make bench-report) rather than edit them", file, edited)
		}
	}
}

// A spliced report passes; one character changed in it, or in its digest,
// does not; the writing around it is kept.
func TestSpliceDigest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "R.md")
	if err := os.WriteFile(file, []byte("# R\n\n<!-- run begins -->\nold\n<!-- run ends -->\n\nwritten by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Splice(file, "run", "| a | 1 |\n| b | 2 |\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if edited := CheckDigests(text); len(edited) > 0 {
		t.Fatalf("as written: %v\n%s", edited, text)
	}
	if !strings.HasPrefix(text, "# R\n\n") || !strings.HasSuffix(text, "<!-- run ends -->\n\nwritten by hand\n") {
		t.Errorf("the writing around the report changed:\n%s", text)
	}
	for _, edit := range []struct{ from, to string }{{"| 2 |", "| 3 |"}, {"sha256 ", "sha256 0"}} {
		if got := CheckDigests(strings.Replace(text, edit.from, edit.to, 1)); !slices.Equal(got, []string{"run"}) {
			t.Errorf("%q → %q: CheckDigests says %v, want [run]", edit.from, edit.to, got)
		}
	}
}
