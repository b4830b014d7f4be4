package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// The lease timings must leave room for the fence and for client-go's retries,
// a certificate named must be there, and a client-side limit must be one
// client-go can keep; start-up refuses what does not hold,
// saying why.
func TestFlagsAreChecked(t *testing.T) {
	certs := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certs, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--leader-elect"}, ""}, // the defaults: 30 s, 20 s, 4 s
		{[]string{"--leader-elect", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}, ""},
		{[]string{"--leader-elect-lease-duration=1s", "--leader-elect-renew-deadline=2s"}, ""}, // no leader election: not used
		{[]string{"--leader-elect", "--leader-elect-lease-duration=21s"}, "at least 2s longer than --leader-elect-renew-deadline (20s)"},
		{[]string{"--leader-elect", "--leader-elect-renew-deadline=30s"}, "at least 2s longer"},
		{[]string{"--leader-elect", "--leader-elect-retry-period=20s"}, "must be longer than 1.2 × --leader-elect-retry-period (20s)"},
		{[]string{"--leader-elect", "--leader-elect-retry-period=0s"}, "must be positive"},
		{[]string{"--metrics-cert-dir=" + certs}, ""},
		{[]string{"--metrics-cert-dir=" + filepath.Join(certs, "typo")}, "--metrics-cert-dir: stat " + filepath.Join(certs, "typo", "tls.crt")},
		{[]string{"--metrics-cert-dir=" + certs, "--metrics-secure=false"}, "--metrics-cert-dir is for --metrics-secure, which is off"},
		{[]string{"--kube-api-qps=20", "--kube-api-burst=30"}, ""},
		{[]string{"--kube-api-qps=-1"}, ""}, // the default: no client-side limit
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps must be -1 (no client-side limit) or above 0"},
		{[]string{"--kube-api-qps=20"}, "with a --kube-api-burst of 1 or more"},
		{[]string{"--pprof"}, ""},
		{[]string{"--max-concurrent-reconciles=0"}, "--max-concurrent-reconciles must be 1 or more"},
		{[]string{"--max-concurrent-repairs=-1"}, "--max-concurrent-repairs 0 or more"},
		{[]string{"--max-concurrent-repairs=0"}, ""},
		{[]string{"--pprof", "--metrics-secure=false"}, "--pprof is served behind --metrics-secure's authorization, which is off"},
		{[]string{"--pprof", "--metrics-bind-address=0"}, "--pprof is served on the metrics endpoint, which --metrics-bind-address=0 turns off"},
	} {
		var f flags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := f.validate()
		if cfg := f.restConfig(&rest.Config{}); err == nil && (float64(cfg.QPS) != f.qps || cfg.Burst != f.burst) {
			t.Errorf("%s: the client gets QPS %v and burst %d", strings.Join(tc.args, " "), cfg.QPS, cfg.Burst)
		}
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// The Go runtime's limit comes from the container's, with room for what the
// runtime does not count; GOMEMLIMIT wins, and a value that is not bytes is
// refused at start-up.
func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
		err  string
	}{
		{map[string]string{}, 0, ""},
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "268435456"}, 208037479, ""},  // 256Mi: 230.4Mi less 32Mi for the binary
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "67108864"}, 33554432, ""},    // 64Mi: half, the least
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "1073741824"}, 932813210, ""}, // 1Gi: 921.6Mi less 32Mi
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "268435456", "GOMEMLIMIT": "100MiB"}, 0, ""},
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "256Mi"}, 0, `CONTAINER_MEMORY_LIMIT="256Mi": want the container's memory limit in bytes`},
		{map[string]string{"CONTAINER_MEMORY_LIMIT": "0"}, 0, "want the container's memory limit in bytes"},
	} {
		got, err := memoryLimit(func(k string) string { return tc.env[k] })
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %d, %v; want %d, %q", tc.env, got, err, tc.want, tc.err)
		}
	}
}
