// Package e2e walks through the lesson, Steps 1 to 9, on a real cluster
// (hack/cluster.sh: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a real node running containerd and the kubelet, and kwok's
// fake nodes), with the real operator binary, its image, and kubectl, and
// checks what the lesson tells the learner to look at. Run it with `make e2e`;
// -v shows each step as it happens.
package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Env is the cluster and binaries every test shares. TestMain builds the
// operator once and starts one cluster, beside any `make cluster` a developer runs.
var Env struct {
	Root, KubectlBin, Kubeconfig, Operator string
	Oracle, Unfenced                       string // test-only builds of the operator (oracle.go, fence_off.go)
	Leccion                                string // the lesson's operator, the benchmark's peer (testdata/leccion)
	ClusterDir                             string // hack/cluster.sh's CLUSTER_DIR: logs/, pids/
	// RealNode: the cluster has node-real, where the Pods of namespaces not
	// marked for kwok run for real (CLUSTER_NODE=none leaves it out).
	RealNode bool
}

// ClusterSh runs hack/cluster.sh on the tests' cluster.
func ClusterSh(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(Env.Root, "hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+Env.ClusterDir, "CLUSTER_PORT=17443")
	return cmd
}

// WebImage is the local stand-in for the default web image, on node-real.
const WebImage = "localhost/nginx-unprivileged:debian"

func TestMain(m *testing.M) {
	code, err := runE2E(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func runE2E(m *testing.M) (int, error) {
	if file := os.Getenv("BENCH_RESULTS"); file != "" {
		return 0, benchReport(file, os.Getenv("BENCH_REPORT"))
	}
	log.SetLogger(logr.Discard()) // the tests' clients have nothing to log
	root, err := filepath.Abs("..")
	if err != nil {
		return 1, err
	}
	Env.Root = root
	tmp, err := os.MkdirTemp("", "operador-e2e-")
	if err != nil {
		return 1, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	run := func(cmd *exec.Cmd) (string, error) {
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	}
	bins, err := run(exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh")))
	if err != nil {
		return 1, err
	}
	Env.KubectlBin = filepath.Join(strings.TrimSpace(bins), "kubectl")
	// The operator as it ships; the oracle of the reliability tests, a build of
	// the same code with oracle.go; and the same without the leader fence.
	Env.Operator, Env.Oracle, Env.Unfenced = filepath.Join(tmp, "operador-promociones"), filepath.Join(tmp, "oracle"), filepath.Join(tmp, "unfenced")
	Env.Leccion = filepath.Join(tmp, "leccion")
	for _, b := range []struct{ bin, tags, pkg string }{
		{Env.Operator, "", "."}, {Env.Oracle, "oracle", "."}, {Env.Unfenced, "nofence", "."},
		{Env.Leccion, "", "./e2e/testdata/leccion"},
	} {
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.bin, b.pkg)
		build.Dir = root
		if _, err := run(build); err != nil {
			return 1, err
		}
	}

	// One folder and one port for every run: a run killed before its cleanup
	// (kill -9, a timeout's panic) is taken down here, not left to break this one.
	Env.ClusterDir = filepath.Join(os.TempDir(), "operador-e2e-cluster")
	Env.RealNode = os.Getenv("CLUSTER_NODE") != "none"
	if _, err := run(ClusterSh("down")); err != nil {
		return 1, err
	}
	before := machineState()
	// Once, whether the tests end or the run is interrupted, and the other waits.
	var once sync.Once
	var downErr error
	down := func() error {
		once.Do(func() {
			if _, downErr = run(ClusterSh("down")); downErr != nil {
				return
			}
			if diff := before.diff(machineState()); diff != "" {
				downErr = fmt.Errorf("hack/cluster.sh down left the machine changed:\n%s", diff)
			}
		})
		return downErr
	}
	stopWatching := cleanUpWhenInterrupted(down)
	defer stopWatching()
	start := time.Now()
	if _, err := run(ClusterSh("up")); err != nil {
		return 1, errors.Join(err, down())
	}
	Env.Kubeconfig = filepath.Join(Env.ClusterDir, "kubeconfig")
	fmt.Printf("cluster up in %s\n", time.Since(start).Round(time.Millisecond))

	// The previous lesson taught the cluster the noun. (kubectl wait fails, rather
	// than waits, on a CRD whose status has no conditions yet: so a poll.)
	kubectl := func(args ...string) (string, error) {
		return run(exec.Command(Env.KubectlBin, append([]string{"--kubeconfig", Env.Kubeconfig}, args...)...))
	}
	if _, err := kubectl("apply", "-f", filepath.Join(root, "manifiestos", "crd.yaml")); err != nil {
		return 1, err
	}
	if err := Poll(time.Minute, 200*time.Millisecond, func() error {
		out, err := kubectl("get", "crd/promociones.tienda.example.com", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err == nil && out != "True" {
			err = fmt.Errorf("Established: %q", out)
		}
		return err
	}); err != nil {
		return 1, errors.Join(err, down())
	}
	code := m.Run()
	return code, down()
}
