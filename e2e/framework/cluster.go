// Package framework is the one harness of the end-to-end suites (e2e/lesson,
// e2e/chaos, e2e/bench), as Cluster API keeps test/framework apart from its
// suites: each suite's TestMain calls Main, which builds the operator and
// starts a cluster of the suite's own (hack/cluster.sh: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok's fake nodes,
// and for the lesson a real node running containerd and the kubelet); a test
// gets its view of it from NewHarness, which starts operator processes, waits
// for things to become true, and reads what the operator and the API server
// recorded (metrics, logs, the audit log).
package framework

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// A Suite is a suite's cluster and binaries, shared by its tests: each suite
// keeps one, which Main fills as it builds them and starts the cluster,
// beside any `make cluster` a developer runs.
type Suite struct {
	Root, KubectlBin, Kubeconfig, Operator string
	Unfenced                               string // the operator with its leader fence off (an ablation variant's edit, built with go build -overlay)
	Leccion                                string // the lesson's operator, the benchmark's peer (e2e/testdata/leccion)
	LeccionCareful                         string // the same, written carefully (its -tags careful build)
	ClusterDir                             string // hack/cluster.sh's CLUSTER_DIR: logs/, pids/
	Port                                   int    // its API server's
	// RealNode: the cluster has the real nodes, where the Pods of namespaces not
	// marked for kwok run for real.
	RealNode bool
}

// Options say what cluster a suite runs on.
type Options struct {
	// Name names the suite's cluster folder, $TMPDIR/operador-e2e-NAME: a run
	// killed before its cleanup is taken down by the next, not left to break it.
	Name string
	// Port is its API server's; etcd takes the next two. Each suite has its
	// own, so that suites may run side by side (make e2e runs chaos and bench so).
	Port int
	// RealNode asks for the real nodes beside kwok's nodes, unless CLUSTER_NODE=none.
	RealNode bool
	// Unfenced and Leccion ask for those builds too (Suite); the operator and
	// the child table build are always built.
	Unfenced, Leccion bool
}

// ClusterSh runs hack/cluster.sh on the suite's cluster.
func (s *Suite) ClusterSh(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.Root, "hack", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+s.ClusterDir, fmt.Sprintf("CLUSTER_PORT=%d", s.Port))
	if s.RealNode {
		cmd.Env = append(cmd.Env, "CLUSTER_NODE=real") // fail where they cannot run, rather than fall back
	} else {
		cmd.Env = append(cmd.Env, "CLUSTER_NODE=none")
	}
	return cmd
}

// RealNodes are the local cluster's real nodes, the lesson's two (hack/node.sh).
var RealNodes = []string{"node-01", "node-02"}

// IsRealNode tells whether the node of that name is one of RealNodes.
func IsRealNode(name string) bool { return slices.Contains(RealNodes, name) }

// WebImage is the operator's default web image. On the real nodes it is a local
// stand-in served under that name by the cluster's docker.io mirror
// (hack/node.sh); on kwok's nodes nothing pulls it.
const WebImage = "docker.io/nginxinc/nginx-unprivileged:1.29-alpine"

// Main runs a suite's tests on a cluster of its own, filling s, and exits: a
// suite's TestMain.
func Main(m *testing.M, o Options, s *Suite) {
	code, err := s.run(m, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func (s *Suite) run(m *testing.M, o Options) (int, error) {
	log.SetLogger(logr.Discard()) // the tests' clients have nothing to log
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return 1, err
	}
	s.Root = root
	tmp, err := os.MkdirTemp("", "operador-e2e-")
	if err != nil {
		return 1, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// An interrupted run exits from the handler, past every defer: it stops
	// the cluster once there is one (down, below), and removes the builds.
	var clusterDown atomic.Pointer[func() error] // set by this goroutine, read by the handler's
	stopWatching := cleanUpWhenInterrupted(func() error {
		var err error
		if down := clusterDown.Load(); down != nil {
			err = (*down)()
		}
		return errors.Join(err, os.RemoveAll(tmp))
	})
	defer stopWatching()
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
	s.KubectlBin = filepath.Join(strings.TrimSpace(bins), "kubectl")
	// The operator as it ships, and the lesson's operators the benchmarks
	// compare it with.
	s.Operator = filepath.Join(tmp, "operador-promociones")
	s.Leccion, s.LeccionCareful = filepath.Join(tmp, "leccion"), filepath.Join(tmp, "leccion-careful")
	for _, b := range []struct {
		bin, tags, pkg string
		want           bool
	}{
		{s.Operator, "", ".", true}, {s.Leccion, "", "./e2e/testdata/leccion", o.Leccion}, {s.LeccionCareful, "careful", "./e2e/testdata/leccion", o.Leccion},
	} {
		if !b.want {
			continue
		}
		build := exec.Command("go", "build", "-tags", b.tags, "-o", b.bin, b.pkg)
		build.Dir = root
		if _, err := run(build); err != nil {
			return 1, err
		}
	}
	// E2E_VARIANT=key: the suite's operator is that ablation variant
	// (hack/ablation-chaos.sh runs the chaos scenarios so).
	if key := os.Getenv("E2E_VARIANT"); key != "" {
		v, ok := AblationVariant(key)
		if !ok || len(v.Edits) == 0 || len(v.Args) > 0 {
			return 1, fmt.Errorf("E2E_VARIANT=%s: no ablation variant of that key built by edits alone", key)
		}
		if s.Operator, err = buildVariant(root, tmp, key, v.Edits...); err != nil {
			return 1, err
		}
		fmt.Printf("the operator is the variant %s: %s taken out\n", key, v.Mechanism)
	}
	// The operator without its leader fence: the frozen-leader scenario shows
	// what the fence stops (the ablation's variant, not a build of the product).
	if o.Unfenced {
		v, _ := AblationVariant("sin-cerca")
		if s.Unfenced, err = buildVariant(root, tmp, "unfenced", v.Edits...); err != nil {
			return 1, err
		}
	}
	if childTable, err = readChildren(filepath.Join(root, "e2e", "testdata", "children.txt")); err != nil {
		return 1, err
	}
	if err := checkChildTable(childTable); err != nil {
		return 1, err
	}

	if p := os.Getenv("E2E_PORT"); p != "" { // a second cluster for the suite, beside a run of it
		if o.Port, err = strconv.Atoi(p); err != nil {
			return 1, fmt.Errorf("E2E_PORT: %w", err)
		}
		o.Name += "-" + p
	}
	s.ClusterDir = filepath.Join(os.TempDir(), "operador-e2e-"+o.Name)
	s.Port = o.Port
	s.RealNode = o.RealNode && os.Getenv("CLUSTER_NODE") != "none"
	if err := claimClusterDir(s.ClusterDir); err != nil {
		return 1, err
	}
	if _, err := run(s.ClusterSh("down")); err != nil {
		return 1, err
	}
	before := machineState(s.ClusterDir)
	// Once, whether the tests end or the run is interrupted, and the other waits.
	var once sync.Once
	var downErr error
	down := func() error {
		once.Do(func() {
			if _, downErr = run(s.ClusterSh("down")); downErr != nil {
				return
			}
			if diff := before.diff(machineState(s.ClusterDir)); diff != "" {
				downErr = fmt.Errorf("hack/cluster.sh down left the machine changed:\n%s", diff)
			}
		})
		return downErr
	}
	clusterDown.Store(&down)
	start := time.Now()
	if _, err := run(s.ClusterSh("up")); err != nil {
		return 1, errors.Join(err, down())
	}
	s.Kubeconfig = filepath.Join(s.ClusterDir, "kubeconfig")
	fmt.Printf("cluster up in %s\n", time.Since(start).Round(time.Millisecond))

	// The previous lesson taught the cluster the noun. (kubectl wait fails, rather
	// than waits, on a CRD whose status has no conditions yet: so a poll.)
	kubectl := func(args ...string) (string, error) {
		return run(exec.Command(s.KubectlBin, append([]string{"--kubeconfig", s.Kubeconfig}, args...)...))
	}
	if _, err := kubectl("apply", "-f", filepath.Join(root, "manifiestos", "crd.yaml")); err != nil {
		return 1, err
	}
	if err := Poll(time.Minute, 200*time.Millisecond, func() error {
		out, err := kubectl("get", "crd/promociones.tienda.example.com", "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err == nil && out != "True" {
			err = fmt.Errorf("the CRD's condition Established is %q", out)
		}
		return err
	}); err != nil {
		return 1, errors.Join(err, down())
	}
	code := m.Run()
	return code, down()
}

// claimClusterDir holds dir for this process until it exits (a lock on
// dir.lock, which the kernel lets go of however the process ends). A second
// run of a suite would otherwise begin by taking down the first's cluster,
// as hack/cluster.sh down cleans the folder before each run: a unit test of
// the chaos package, run during a whole make chaos, so cut it short.
func claimClusterDir(dir string) error {
	f, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		_ = f.Close()
		return fmt.Errorf("another run (pid %s) is using the cluster in %s: wait for it, or run beside it on a cluster of its own with E2E_PORT=<a free port>", strings.TrimSpace(string(holder)), dir)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	claimed = f // open, and so locked, until the process exits
	return nil
}

var claimed *os.File
