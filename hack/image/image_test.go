package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const epoch = 1764547200 // 2025-12-01, as SOURCE_DATE_EPOCH

// build runs `image operator` as `make image` does.
func build(t *testing.T, out string) {
	t.Helper()
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200")
	if err := run([]string{"operator", "-repo", "../..", "-o", out, "-revision", "0123abc"}); err != nil {
		t.Fatal(err)
	}
}

// The operator's image: reproducible, one index for two platforms, the
// Dockerfile's USER and ENTRYPOINT, and a layer holding the static binary and
// nothing else. Then the tarball is read back as the tools that load it would.
func TestOperatorImage(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.tar"), filepath.Join(dir, "second.tar")
	build(t, first)
	build(t, second)
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the same commit differ")
	}

	d := repoDockerfile(t)
	if d.user != "65532:65532" || !slices.Equal(d.entrypoint, []string{"/operador"}) || d.binary != "/operador" {
		t.Errorf("the Dockerfile says USER %s, ENTRYPOINT %q, binary %s; the lesson has 65532:65532, [/operador], /operador", d.user, d.entrypoint, d.binary)
	}

	idx := readLayout(t, first)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range im.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: the config says %s/%s", desc.Platform, cf.OS, cf.Architecture)
		}
		if cf.Config.User != d.user || !slices.Equal(cf.Config.Entrypoint, d.entrypoint) {
			t.Errorf("%s: USER %q ENTRYPOINT %q, want the Dockerfile's %q %q", desc.Platform, cf.Config.User, cf.Config.Entrypoint, d.user, d.entrypoint)
		}
		if !cf.Created.Equal(time.Unix(epoch, 0)) {
			t.Errorf("%s: created %s, want SOURCE_DATE_EPOCH", desc.Platform, cf.Created)
		}
		if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != "0123abc" {
			t.Errorf("%s: revision label %q", desc.Platform, got)
		}
		checkLayer(t, img, desc.Platform.Architecture)
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("the index holds %v, want %v", platforms, want)
	}

	// docker load and crane push read manifest.json: it names this machine's image.
	docker, err := tarball.ImageFromPath(first, nil)
	if err != nil {
		t.Fatalf("not a docker-archive: %v", err)
	}
	dockerCfg, err := docker.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	hostImg := imageFor(t, idx, "amd64")
	if want, _ := hostImg.ConfigName(); dockerCfg != want {
		t.Errorf("manifest.json names config %s, the index's linux/amd64 image has %s", dockerCfg, want)
	}
}

// .dockerignore lets into a Docker build's context exactly what the
// Dockerfile copies, so that the cluster's keys and binaries never enter it.
func TestDockerignoreAllowsOnlyTheSources(t *testing.T) {
	d := repoDockerfile(t)
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for line := range strings.SplitSeq(string(ignore), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			rules = append(rules, line)
		}
	}
	want := []string{"*"}
	for _, s := range d.sources {
		want = append(want, "!"+s)
	}
	if !slices.Equal(rules, want) {
		t.Errorf(".dockerignore says %q; the Dockerfile copies %q, so it should say %q", rules, d.sources, want)
	}
}

// repoDockerfile is what the builder reads from the repository's Dockerfile.
func repoDockerfile(t *testing.T) dockerfile {
	t.Helper()
	src, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDockerfile(src)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkLayer: one layer, holding one file, the binary at /operador, static and
// built for arch.
func checkLayer(t *testing.T, img v1.Image, arch string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", arch, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name != "operador" {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: /operador is type %c mode %o owner %d:%d, want a file 755 of root", arch, h.Typeflag, h.Mode, h.Uid, h.Gid)
		}
		bin, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: /operador is not an ELF binary: %v", arch, err)
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
			t.Errorf("%s: built for %v", arch, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: dynamically linked (%v segment)", arch, p.Type)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s: needs shared libraries %v", arch, libs)
		}
	}
	if !slices.Equal(names, []string{"operador"}) {
		t.Errorf("%s: the layer holds %q, want only the binary", arch, names)
	}
}

// readLayout unpacks the tarball and opens it as an OCI image layout; the
// layout's one entry is the image index.
func readLayout(t *testing.T, tarPath string) v1.ImageIndex {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	untar(t, tarPath, dir)
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("not an OCI layout: %v", err)
	}
	im, err := l.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index.json: %v entries, %v", len(im.Manifests), err)
	}
	if got := im.Manifests[0].Annotations["io.containerd.image.name"]; got != "localhost/operador-promociones:dev" {
		t.Errorf("index.json names the image %q", got)
	}
	idx, err := l.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func untar(t *testing.T, tarPath, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xf", tarPath, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf: %v\n%s", err, out)
	}
}

func imageFor(t *testing.T, idx v1.ImageIndex, arch string) v1.Image {
	t.Helper()
	im, _ := idx.IndexManifest()
	for _, desc := range im.Manifests {
		if desc.Platform.Architecture == arch {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s image", arch)
	return nil
}

// crane push takes the tarball (the linux/amd64 image, from manifest.json), and
// the unpacked layout (the whole index, digest unchanged), into a registry on
// loopback. The crane here is the real command, built from the module proxy.
func TestCranePush(t *testing.T) {
	tarPath := filepath.Join(t.TempDir(), "operador.tar")
	build(t, tarPath)
	idx := readLayout(t, tarPath)
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	crane := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"tool", "crane"}, args...)...).Output()
		if err != nil {
			t.Fatalf("crane %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}

	crane("push", tarPath, host+"/operador-promociones:amd64")
	pushedCfg := crane("config", host+"/operador-promociones:amd64")
	raw, err := imageFor(t, idx, "amd64").RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if pushedCfg != string(raw) {
		t.Errorf("crane push of the tarball pushed another config:\n%s\nwant\n%s", pushedCfg, raw)
	}

	dir := filepath.Join(t.TempDir(), "layout")
	untar(t, tarPath, dir)
	want, _ := idx.Digest()
	if got := crane("push", dir, host+"/operador-promociones:dev"); got != host+"/operador-promociones@"+want.String() {
		t.Errorf("crane push of the layout: %s, want the index %s", got, want)
	}
	if got := crane("digest", host+"/operador-promociones:dev"); got != want.String() {
		t.Errorf("the registry holds %s, want %s", got, want)
	}
}

// podman load takes the tarball as an OCI archive (the whole index, digest
// unchanged), and podman pull docker-archive: as the docker-archive that docker
// load reads (this machine has no Docker engine). podman runs in a mount
// namespace of the test's own, over empty tmpfs on /run and /var/lib, so that
// nothing it keeps reaches this machine.
func TestPodmanLoad(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed: hack/debian-packages.sh installs it")
	}
	tarPath := filepath.Join(t.TempDir(), "operador.tar")
	build(t, tarPath)
	idx := readLayout(t, tarPath)
	script := `set -e
mount -n -t tmpfs tmpfs /run
mount -n -t tmpfs tmpfs /var/lib
p="podman --root /var/lib/containers --runroot /run/containers --tmpdir /run/libpod --storage-driver vfs"
$p load -q -i "$1" >&2
$p image inspect localhost/operador-promociones:dev --format '{{.Digest}} {{.Architecture}} {{.Config.User}} {{.Config.Entrypoint}}'
$p rmi -a >/dev/null
$p pull -q docker-archive:"$1"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", tarPath)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	digest, _ := idx.Digest()
	cfg, _ := imageFor(t, idx, "amd64").ConfigName()
	if want := digest.String() + " amd64 65532:65532 [/operador]"; len(lines) != 2 || lines[0] != want {
		t.Errorf("podman load: %q, want %q", lines, want)
	}
	if len(lines) == 2 && lines[1] != cfg.Hex {
		t.Errorf("podman pull docker-archive: image %s, want the linux/amd64 config %s", lines[1], cfg.Hex)
	}
}
