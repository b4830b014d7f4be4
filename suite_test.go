package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The integration tests run against a real kube-apiserver and etcd, started by
// envtest from binaries built by hack/k8s-binaries.sh (no download site is
// reachable here), on the first test that asks for them: the pure tests need
// none, and `go test -short .` runs those alone. envtest runs no controllers:
// no Deployment controller, no garbage collector. Where a test needs what
// those would do, it says so.

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client // an admin client that reads straight from the API server
	started   sync.Once
	startErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testEnv != nil {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needCluster starts kube-apiserver and etcd, once, for the tests that need them.
func needCluster(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("an integration test: it needs kube-apiserver and etcd, so go test -short leaves it out")
	}
	started.Do(func() { startErr = startCluster() })
	if startErr != nil {
		t.Fatal(startErr)
	}
}

func startCluster() error {
	assets, err := k8sBinaries()
	if err != nil {
		return fmt.Errorf("integration tests need kube-apiserver and etcd: %w", err)
	}
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{filepath.Join("manifiestos", "crd.yaml")}},
		ErrorIfCRDPathMissing: true,
	}
	if cfg, err = testEnv.Start(); err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	stopOnInterrupt()
	k8sClient, err = client.New(cfg, client.Options{Scheme: newScheme()})
	return err
}

// stopOnInterrupt stops kube-apiserver and etcd if the run is stopped (SIGINT,
// SIGTERM) or orphaned (go test was killed), which TestMain would not see.
func stopOnInterrupt() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	parent := os.Getppid()
	go func() {
		for os.Getppid() == parent {
			select {
			case <-signals:
				parent = -1
			case <-time.After(time.Second):
			}
		}
		_ = testEnv.Stop()
		os.Exit(1)
	}()
}

// k8sBinaries is the folder holding etcd and kube-apiserver: $KUBEBUILDER_ASSETS
// when make has set it, or else what hack/k8s-binaries.sh builds (once) and prints.
func k8sBinaries() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join("hack", "k8s-binaries.sh"))
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/k8s-binaries.sh: %w", err)
	}
	return strings.TrimSpace(out.String()), nil
}

var nsCounter atomic.Int32

// newNamespace gives each test a namespace of its own, so tests cannot see
// each other's objects.
func newNamespace(t testing.TB) string {
	t.Helper()
	needCluster(t)
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	name = strings.Trim(fmt.Sprintf("t%d-%.50s", nsCounter.Add(1), name), "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// namespaceWithOperator gives the test a namespace of its own and an operator
// watching it (startOperator).
func namespaceWithOperator(t *testing.T) (ns string, stop func() error) {
	t.Helper()
	ns = newNamespace(t)
	return ns, startOperator(t, ns)
}

// promocionAlone creates the lesson's rebajas-verano in a namespace of the
// test's own, with no operator: for tests that call Reconcile themselves.
func promocionAlone(t *testing.T, banner string, replicas int32) *Promocion {
	t.Helper()
	return createPromocion(t, newNamespace(t), "rebajas-verano", banner, replicas)
}

// startOperator runs the operator in-process, as main does, watching only
// the given namespaces. It stops when the test ends; the returned function stops it
// earlier and returns what the manager returned.
func startOperator(t *testing.T, namespaces ...string) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	f := testFlags(namespaces...)
	opts := f.managerOptions()
	opts.Logger = testr.NewWithOptions(t, testr.Options{LogTimestamp: true}) // shown when the test fails, or with -v
	opts.Controller.SkipNameValidation = new(true)                           // one controller per test, all named "promocion"
	go func() { done <- run(ctx, cfg, opts, DefaultWebImage, f.workers) }()
	var stopped atomic.Bool
	var result error
	stop = func() error {
		if stopped.Swap(true) {
			return result
		}
		cancel()
		select {
		case result = <-done:
		case <-time.After(time.Minute):
			result = errors.New("the manager did not stop within a minute")
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("operator: %v", err)
		}
	})
	return stop
}

// testFlags are main's flags for an operator that watches only the given
// namespaces and listens on no port.
func testFlags(namespaces ...string) flags {
	var f flags
	f.bind(flag.NewFlagSet("test", flag.PanicOnError))
	f.metricsAddr, f.probeAddr, f.namespaces = "0", "0", namespaces
	return f
}

// operatorCache is the cache the operator's manager would make for these
// namespaces (its scope and transforms), started alone, stopped with the test:
// for tests that read what the operator would hold in memory.
func operatorCache(t *testing.T, namespaces ...string) cache.Cache {
	t.Helper()
	f := testFlags(namespaces...)
	opts := f.managerOptions()
	opts.Cache.Scheme = opts.Scheme
	c, err := cache.New(cfg, opts.Cache)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = c.Start(cctx) }()
	return c
}

// newReconciler is the operator's reconciler on client c, for tests that call
// Reconcile themselves. Its events reach the API server.
func newReconciler(t *testing.T, c client.Client) *PromocionReconciler {
	recorder, stop, err := startEvents(ctx, cfg, c.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return &PromocionReconciler{Client: c, APIReader: k8sClient, Scheme: c.Scheme(), Recorder: recorder, WebImage: DefaultWebImage}
}

// eventually retries check until it returns nil, failing the test with the
// last error after 30 s.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, what, 30*time.Second, check)
}

// eventuallyWithin is eventually, for a wait that may take longer by design.
func eventuallyWithin(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
