package framework

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Every ablation variant still applies to the code and compiles (go vet with
// its overlay, which type-checks without linking), and every
// mechanism's code is found: a variant that no longer matches the product
// fails here, in seconds, not in an hour of benchmarks.
func TestAblationVariantsBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seen := map[string]bool{}
	for _, v := range AblationVariants {
		if seen[v.Key] {
			t.Errorf("two variants named %s", v.Key)
		}
		seen[v.Key] = true
		if (len(v.Edits) == 0) == (len(v.Args) == 0) {
			t.Errorf("%s: a variant takes its mechanism out by flags or by edits, one of the two", v.Key)
		}
		if n := LinesOf(t, root, v.Code); n == 0 && v.Lines == 0 && len(v.Edits) > 0 {
			t.Errorf("%s: no lines counted for its mechanism", v.Key)
		}
		if len(v.Edits) == 0 {
			continue
		}
		file, err := overlay(root, dir, v.Key, v.Edits...)
		if err != nil {
			t.Fatal(err)
		}
		vet := exec.Command("go", "vet", "-overlay", file, ".")
		vet.Dir = root
		if out, err := vet.CombinedOutput(); err != nil {
			t.Errorf("variant %s does not compile: %v\n%s", v.Key, err, out)
		}
	}
}
