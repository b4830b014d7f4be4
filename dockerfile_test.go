package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No Docker engine runs here, so this test runs the Dockerfile's own build
// command, for each target architecture, and checks that the result is a static
// binary that distroless/static can run: no program interpreter, no shared
// libraries.
func TestDockerfileBuildsStaticBinary(t *testing.T) {
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^RUN (.*go build .*) -o /operador \.$`).FindSubmatch(dockerfile)
	if build == nil {
		t.Fatal("no `RUN ... go build ... -o /operador .` line in the Dockerfile")
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "operador")
			cmd := exec.Command("sh", "-c", string(build[1])+` -o "$OUT" .`)
			cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+arch, "OUT="+out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, msg)
			}
			f, err := elf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
				t.Errorf("built for %v, want %v", f.Machine, want)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("the binary is dynamically linked (%v segment)", p.Type)
				}
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Errorf("the binary needs shared libraries: %s", strings.Join(libs, ", "))
			}
		})
	}
}
