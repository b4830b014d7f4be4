package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerfile is what the image builder takes from the repository's Dockerfile,
// so that the Dockerfile stays the one description of the operator's image.
type dockerfile struct {
	sources    []string // the build stage's COPY sources: what the compiler sees
	build      string   // the RUN line's go build command, without its -o and package
	binary     string   // where the final stage puts the binary (COPY --from=build)
	user       string   // USER
	entrypoint []string // ENTRYPOINT
}

var (
	copyRe       = regexp.MustCompile(`(?m)^COPY ([^-].*) \./$`)
	buildRe      = regexp.MustCompile(`(?m)^RUN (.*go build .*) -o (\S+) \.$`)
	copyFromRe   = regexp.MustCompile(`(?m)^COPY --from=\S+ (\S+) (\S+)$`)
	userRe       = regexp.MustCompile(`(?m)^USER (\S+)$`)
	entrypointRe = regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`)
)

func parseDockerfile(src []byte) (dockerfile, error) {
	var d dockerfile
	for _, m := range copyRe.FindAllSubmatch(src, -1) {
		d.sources = append(d.sources, strings.Fields(string(m[1]))...)
	}
	build := buildRe.FindSubmatch(src)
	copyFrom := copyFromRe.FindSubmatch(src)
	user := userRe.FindSubmatch(src)
	entrypoint := entrypointRe.FindSubmatch(src)
	switch {
	case len(d.sources) == 0:
		return d, fmt.Errorf("no `COPY <files> ./` line in the build stage")
	case build == nil:
		return d, fmt.Errorf("no `RUN ... go build ... -o <path> .` line")
	case copyFrom == nil || string(copyFrom[1]) != string(build[2]):
		return d, fmt.Errorf("no `COPY --from=build %s <path>` line", build[2])
	case user == nil:
		return d, fmt.Errorf("no USER line")
	case entrypoint == nil:
		return d, fmt.Errorf("no ENTRYPOINT [...] line")
	}
	d.build, d.binary, d.user = string(build[1]), string(copyFrom[2]), string(user[1])
	if err := json.Unmarshal(entrypoint[1], &d.entrypoint); err != nil {
		return d, fmt.Errorf("ENTRYPOINT: %w", err)
	}
	return d, nil
}

// compile runs the Dockerfile's go build line for a platform, in a folder
// holding only what the Dockerfile copies into its build stage, as the Docker
// build would: the same command on the same inputs gives the same binary.
func (d dockerfile) compile(repo string, p v1.Platform, out string) error {
	stage, err := os.MkdirTemp("", "operador-build-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(stage) }()
	for _, pattern := range d.sources {
		files, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("COPY %s: no such files in %s", pattern, repo)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(stage, filepath.Base(f)), b, 0o644); err != nil {
				return err
			}
		}
	}
	cmd := exec.Command("sh", "-c", d.build+` -o "$OUT" .`)
	cmd.Dir = stage
	cmd.Env = append(os.Environ(), "TARGETOS="+p.OS, "TARGETARCH="+p.Architecture, "OUT="+out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s (TARGETOS=%s TARGETARCH=%s): %w\n%s", d.build, p.OS, p.Architecture, err, msg)
	}
	return nil
}

// labels describe an image; created and revision come from the commit.
type meta struct {
	created  time.Time
	revision string
}

func (m meta) labels(title string) map[string]string {
	l := map[string]string{"org.opencontainers.image.title": title}
	if m.revision != "" {
		l["org.opencontainers.image.revision"] = m.revision
	}
	return l
}

// operatorIndex builds the operator's image for each platform, under one index.
func operatorIndex(repo string, platforms []v1.Platform, m meta) (v1.ImageIndex, error) {
	src, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	d, err := parseDockerfile(src)
	if err != nil {
		return nil, fmt.Errorf("reading the Dockerfile: %w", err)
	}
	var images []v1.Image
	for _, p := range platforms {
		rootfs, err := os.MkdirTemp("", "operador-rootfs-")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(rootfs) }()
		if err := d.compile(repo, p, filepath.Join(rootfs, strings.TrimPrefix(d.binary, "/"))); err != nil {
			return nil, err
		}
		img, err := dirImage(rootfs, p, v1.Config{
			User:       d.user,
			Entrypoint: d.entrypoint,
			Labels:     m.labels("operador-promociones"),
		}, m.created)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	return index(images...)
}

// dirImage is an image of one layer holding the folder root: every file owned
// by root, modes normalised (755 or 644, 1777 for a sticky folder), every time
// set to created, entries in name order, so that the same folder always gives
// the same digest, whatever the umask.
func dirImage(root string, p v1.Platform, cfg v1.Config, created time.Time) (v1.Image, error) {
	layerTar, err := tarDir(root, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = cfg
	cf.Created = v1.Time{Time: created.UTC()}
	cf.History = nil
	return mutate.ConfigFile(img, cf)
}

// index puts images under one OCI index, each described by its platform.
func index(images ...v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
		}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex), nil
}

func tarDir(root string, mtime time.Time) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != root {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime.UTC(), Format: tar.FormatPAX}
		switch {
		case fi.IsDir() && fi.Mode()&fs.ModeSticky != 0: // /tmp: anyone writes, only the owner deletes
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o1777
		case fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag, h.Mode = tar.TypeSymlink, 0o777
			if h.Linkname, err = os.Readlink(p); err != nil {
				return nil, err
			}
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size, h.Mode = tar.TypeReg, fi.Size(), 0o644
			if fi.Mode()&0o111 != 0 {
				h.Mode = 0o755
			}
		default:
			return nil, fmt.Errorf("%s: only folders, files and symlinks go into an image", p)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			_, err = io.Copy(tw, f)
			err = errors.Join(err, f.Close())
			if err != nil {
				return nil, err
			}
		}
	}
	err = tw.Close()
	return buf.Bytes(), err
}

// writeArchive writes idx as a tarball that is at once an OCI image layout (for
// ctr images import, podman load, and Docker 25 and later) and a docker-archive
// whose manifest.json names the image for the platform loadAs (for docker load
// with the classic image store, and crane push). tarDir fixes the order and the
// times, so the same index always gives the same bytes.
func writeArchive(w io.Writer, idx v1.ImageIndex, tag name.Tag, loadAs v1.Platform, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "operador-layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = l.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.String(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	}))
	if err != nil {
		return err
	}
	docker, err := dockerManifest(idx, tag, loadAs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), docker, 0o644); err != nil {
		return err
	}
	b, err := tarDir(dir, mtime)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// dockerManifest is the manifest.json of a docker-archive holding idx's image
// for platform p, whose blobs are where the OCI layout keeps them.
func dockerManifest(idx v1.ImageIndex, tag name.Tag, p v1.Platform) ([]byte, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		if desc.Platform == nil || desc.Platform.OS != p.OS || desc.Platform.Architecture != p.Architecture {
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		m, err := img.Manifest()
		if err != nil {
			return nil, err
		}
		blob := func(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }
		entry := struct {
			Config   string
			RepoTags []string
			Layers   []string
		}{Config: blob(m.Config.Digest), RepoTags: []string{tag.String()}}
		for _, l := range m.Layers {
			entry.Layers = append(entry.Layers, blob(l.Digest))
		}
		return json.Marshal([]any{entry})
	}
	return nil, fmt.Errorf("the index has no image for %s/%s", p.OS, p.Architecture)
}
