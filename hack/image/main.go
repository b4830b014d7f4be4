// Command image builds OCI image tarballs without a Docker engine.
//
//	image operator -o FILE [-tag REF] [-platforms linux/amd64,linux/arm64] [-repo DIR] [-revision SHA]
//	image dir -o FILE -tag REF [-user UID:GID] [-entrypoint JSON] [-cmd JSON] [-port N] [-stop-signal SIG] ROOTFS
//
// operator compiles the operator with the Dockerfile's own build command, once
// for each platform, and takes USER and ENTRYPOINT from the Dockerfile too.
// dir packs a prepared folder (the node's pause and web server images).
//
// SOURCE_DATE_EPOCH, in seconds, is the images' creation time and every
// file's time (the Makefile passes the commit's time; unset, it is 0), so that
// two builds of one commit give the same digest.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "operator" && args[0] != "dir") {
		return fmt.Errorf("usage: image operator|dir [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("o", "", "the tarball to write")
	tag := fs.String("tag", "localhost/operador-promociones:dev", "the image's name and tag, in the tarball")
	revision := fs.String("revision", "", "the commit, as the label org.opencontainers.image.revision")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "operator: the platforms to build")
	repo := fs.String("repo", ".", "operator: the repository holding the Dockerfile")
	user := fs.String("user", "", "dir: USER")
	entrypoint := fs.String("entrypoint", "", "dir: ENTRYPOINT, a JSON array")
	cmd := fs.String("cmd", "", "dir: CMD, a JSON array")
	port := fs.Int("port", 0, "dir: EXPOSE, TCP")
	stopSignal := fs.String("stop-signal", "", "dir: STOPSIGNAL")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-o is required")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	m := meta{revision: *revision}
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		m.created = time.Unix(secs, 0)
	} else {
		m.created = time.Unix(0, 0)
	}
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}

	var idx v1.ImageIndex
	switch args[0] {
	case "operator":
		var ps []v1.Platform
		for _, s := range strings.Split(*platforms, ",") {
			p, err := v1.ParsePlatform(s)
			if err != nil {
				return err
			}
			ps = append(ps, *p)
		}
		if idx, err = operatorIndex(*repo, ps, m); err != nil {
			return err
		}
	case "dir":
		if fs.NArg() != 1 {
			return fmt.Errorf("dir takes one folder, the image's root")
		}
		cfg := v1.Config{User: *user, StopSignal: *stopSignal, Labels: m.labels(ref.RepositoryStr())}
		for flagValue, field := range map[string]*[]string{*entrypoint: &cfg.Entrypoint, *cmd: &cfg.Cmd} {
			if flagValue != "" {
				if err := json.Unmarshal([]byte(flagValue), field); err != nil {
					return fmt.Errorf("%q is not a JSON array: %w", flagValue, err)
				}
			}
		}
		if *port != 0 {
			cfg.ExposedPorts = map[string]struct{}{fmt.Sprintf("%d/tcp", *port): {}}
		}
		img, err := dirImage(fs.Arg(0), host, cfg, m.created)
		if err != nil {
			return err
		}
		if idx, err = index(img); err != nil {
			return err
		}
	}

	// Written beside, then renamed: an interrupted build leaves no half tarball.
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := writeArchive(f, idx, ref, host, m.created); err != nil {
		return errors.Join(err, f.Close(), os.Remove(tmp))
	}
	if err := f.Close(); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s@%s\n", *out, ref, digest)
	return os.Rename(tmp, *out)
}
