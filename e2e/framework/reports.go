package framework

// Reports: splicing a run's report into its Markdown file, the commit it
// ran on, and small helpers of the tables.

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Splice writes report into file between the lines <!-- NAME begins --> and
// <!-- NAME ends -->, keeping the rest; a file not there yet is made with
// them, and one without them is left alone, with an error. The report ends
// with a line of its digest (Digest), so that a hand edit of it shows
// (CheckDigests).
func Splice(file, name, report string) error {
	begin, end := "<!-- "+name+" begins -->\n", "<!-- "+name+" ends -->\n"
	if !strings.HasSuffix(report, "\n") {
		report += "\n"
	}
	report += Digest(report)
	old, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(file, []byte(begin+report+end), 0o644)
	}
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		// Never the whole file in its place: what is around the report is someone's writing.
		return fmt.Errorf("%s has no %q and %q to write the report between", file, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	out := append(append(append([]byte{}, old[:i+len(begin)]...), report...), old[j:]...)
	return os.WriteFile(file, out, 0o644)
}

// Digest is the line that ends a written report: the SHA-256 of the report
// above it.
func Digest(report string) string {
	return fmt.Sprintf("<!-- sha256 %x: written by the run; a hand edit shows -->\n", sha256.Sum256([]byte(report)))
}

var block = regexp.MustCompile(`(?s)<!-- ([\w-]+) begins -->\n(.*?)<!-- ([\w-]+) ends -->\n`)

// CheckDigests checks that every report written into text by Splice is as
// it was written: it ends with its digest. It returns the names of the
// reports that do not.
func CheckDigests(text string) (edited []string) {
	for _, m := range block.FindAllStringSubmatch(text, -1) {
		name, body := m[1], m[2]
		i := strings.LastIndex(strings.TrimSuffix(body, "\n"), "\n") + 1
		if m[3] != name || body[i:] != Digest(body[:i]) {
			edited = append(edited, name)
		}
	}
	return edited
}

// Commit is the commit a run runs on, for its report ("ran on commit ...",
// which hack/report-age.sh reads): HEAD, and whether the product's files
// differ from it.
func (s *Suite) Commit() string {
	out, err := exec.Command("git", "-C", s.Root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	commit := strings.TrimSpace(string(out))
	dirty, _ := exec.Command("git", "-C", s.Root, "status", "--porcelain", "--", ":(glob)*.go", "go.mod", "go.sum", "Dockerfile", "manifiestos").Output()
	if len(bytes.TrimSpace(dirty)) > 0 {
		commit += ", with uncommitted changes to the product"
	}
	return commit
}

// First is at most the First n of s.
func First[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// Ms prints a duration in milliseconds, or seconds from 10 s up.
func Ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
