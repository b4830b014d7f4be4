package framework

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// state is what a node could leave on this machine: the rule is that
// `hack/cluster.sh down` puts every part of it back as it found it.
type state map[string][]string

func machineState(clusterDir string) state {
	lines := func(name string, args ...string) []string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", name, err)}
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	dirs := func(pattern string) []string {
		found, _ := filepath.Glob(pattern)
		return found
	}
	s := state{
		"network links":   lines("ip", "-o", "-br", "link"),
		"addresses":       lines("ip", "-o", "-br", "addr"),
		"routes":          lines("ip", "route"),
		"mounts":          lines("cat", "/proc/mounts"),
		"firewall rules":  lines("iptables-save"),
		"cgroups":         dirs("/sys/fs/cgroup/*/*/"),
		"cgroup v2 root":  subtreeControl(),
		"/run":            dirs("/run/*"),
		"/var/lib":        dirs("/var/lib/*"),
		"/var/log":        dirs("/var/log/*"),
		"/etc/cni, /opt":  append(dirs("/etc/cni/*"), dirs("/opt/*")...),
		"kernel settings": lines("sysctl", "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops", "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"),
	}
	// The dump's timestamps and packet counters change with time and traffic, not with rules.
	for i, l := range s["firewall rules"] {
		if strings.HasPrefix(l, "#") {
			l = ""
		}
		s["firewall rules"][i] = counters.ReplaceAllString(l, "")
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && inDir(b, clusterDir) {
			s["processes of the cluster"] = append(s["processes of the cluster"], strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return s
}

// inDir tells whether a process's command line (its arguments, each ended
// by NUL) names dir or a file in it: not another suite's cluster whose
// folder begins alike (/tmp/operador-e2e-chaos-17943 beside
// /tmp/operador-e2e-chaos, with E2E_PORT).
func inDir(cmdline []byte, dir string) bool {
	for rest := cmdline; ; {
		i := bytes.Index(rest, []byte(dir))
		if i < 0 {
			return false
		}
		rest = rest[i+len(dir):]
		if len(rest) == 0 || rest[0] == '/' || rest[0] == 0 {
			return true
		}
	}
}

// subtreeControl: what the root of cgroup v2 hands down, on this machine's
// cgroup2 beside cgroup v1, or on a machine with cgroup v2 alone.
func subtreeControl() []string {
	var found []string
	for _, f := range []string{"/sys/fs/cgroup/unified/cgroup.subtree_control", "/sys/fs/cgroup/cgroup.subtree_control"} {
		if b, err := os.ReadFile(f); err == nil {
			found = append(found, f+": "+strings.TrimSpace(string(b)))
		}
	}
	return found
}

// diff says what after has that s had not, and the reverse.
func (s state) diff(after state) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(after)) {
		for _, l := range after[k] {
			if !slices.Contains(s[k], l) {
				fmt.Fprintf(&b, "  %s: new %s\n", k, l)
			}
		}
		for _, l := range s[k] {
			if !slices.Contains(after[k], l) {
				fmt.Fprintf(&b, "  %s: gone %s\n", k, l)
			}
		}
	}
	return b.String()
}

// cleanUpWhenInterrupted runs cleanUp and exits if the test binary is told to
// stop (SIGINT, SIGTERM) or is orphaned (its parent, go test, was killed), so
// that no cluster, node or operator outlives the run. It returns a function
// that stops watching.
func cleanUpWhenInterrupted(cleanUp func() error) func() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	parent := os.Getppid()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case sig := <-signals:
				fmt.Fprintf(os.Stderr, "e2e: %s: stopping the operators and the cluster\n", sig)
			case <-tick.C:
				if os.Getppid() == parent {
					continue
				}
				fmt.Fprintln(os.Stderr, "e2e: go test is gone: stopping the operators and the cluster")
			}
			killChildren()
			if err := cleanUp(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
			}
			os.Exit(1)
		}
	}()
	return func() { signal.Stop(signals); close(done) }
}

// killChildren kills the processes this one started: operators, kubectl
// port-forward, chromium.
func killChildren() {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
