package lesson

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// hack/cluster.sh must fail clearly, naming the component and its log, and leave
// nothing behind: here, once for a port in use and once for a binary that dies,
// with and without the real node.
func TestClusterFailsCleanly(t *testing.T) {
	root := suite.Root
	modes := []string{"none"}
	if suite.RealNode {
		modes = append(modes, "real")
	}
	for _, node := range modes {
		up := func(dir, port string) (string, error) {
			cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), "up")
			cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "CLUSTER_PORT="+port, "CLUSTER_NODE="+node)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		leftovers := func(dir, port string) []string {
			var found []string
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(dir)) {
					found = append(found, strings.ReplaceAll(string(b), "\x00", " "))
				}
			}
			if out, err := exec.Command("ip", "link", "show", "opn"+port).CombinedOutput(); err == nil {
				found = append(found, "the node's link: "+string(out))
			}
			cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/operador-" + port)
			return append(found, cgroups...)
		}

		t.Run("port in use, node "+node, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
			dir := t.TempDir()
			out, err := up(dir, port)
			if err == nil || !strings.Contains(out, "kube-apiserver cannot start: port "+port+" is already in use") {
				t.Errorf("want a failure naming kube-apiserver and port %s, got %v:\n%s", port, err, out)
			}
			if p := leftovers(dir, port); len(p) > 0 {
				t.Errorf("left behind: %q", p)
			}
		})

		t.Run("a binary that dies, node "+node, func(t *testing.T) {
			dir := t.TempDir()
			// Certificates that kube-apiserver cannot load: etcd starts, kube-apiserver dies.
			pki := filepath.Join(dir, "pki")
			if err := os.MkdirAll(pki, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub", "complete"} {
				if err := os.WriteFile(filepath.Join(pki, f), []byte("not a certificate"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, err := up(dir, "17643")
			log := filepath.Join(dir, "logs", "kube-apiserver.log")
			if err == nil || !strings.Contains(out, "kube-apiserver failed: the process exited") || !strings.Contains(out, log) {
				t.Errorf("want a failure naming kube-apiserver and %s, got %v:\n%s", log, err, out)
			}
			if p := leftovers(dir, "17643"); len(p) > 0 {
				t.Errorf("left behind: %q", p)
			}
		})
	}
}

// Where no real node can run, `make cluster` says why in one line and starts
// the cluster with kwok's nodes alone, never a stack of errors. This machine
// can run them, so its cgroup filesystem is stood in for (CGROUP_FS): first
// node-support's answer for each kind of machine, then a whole cluster up on a
// machine with no cgroups.
func TestClusterFallsBackToKwok(t *testing.T) {
	root := suite.Root
	sh := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CLUSTER_NODE=") { // auto, the default
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// fake makes a cgroup filesystem: "name/" a folder, "name=text" a file.
	fake := func(entries ...string) string {
		dir := t.TempDir()
		for _, e := range entries {
			var err error
			if name, text, ok := strings.Cut(e, "="); ok {
				err = os.WriteFile(filepath.Join(dir, name), []byte(text+"\n"), 0o644)
			} else {
				err = os.MkdirAll(filepath.Join(dir, e), 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct{ machine, fs, want string }{
		{"cgroup v2 (most current distributions)", fake("cgroup.controllers=cpuset cpu io memory pids", "cgroup.subtree_control=", "cgroup.procs=1"), ""},
		{"cgroup v2 without the pids controller", fake("cgroup.controllers=cpu memory", "cgroup.subtree_control=", "cgroup.procs="), "cgroup v2 without the pids controller(s)"},
		{"cgroup v2, inside a container's cgroup", fake("cgroup.controllers=cpu memory pids", "cgroup.type=domain", "cgroup.subtree_control=", "cgroup.procs=1"),
			"cgroup v2, seen from a cgroup with processes of its own"},
		{"cgroup v2, inside a container whose processes were moved down", fake("cgroup.controllers=cpu memory pids", "cgroup.type=domain", "cgroup.subtree_control=cpu memory pids", "cgroup.procs="), ""},
		{"no cgroups mounted", fake(), "no cgroup v1 memory and cpu hierarchies and no cgroup v2"},
		{"cgroup v1 (this project's machines)", fake("memory/", "cpu/", "unified/"), ""},
	} {
		out, err := sh([]string{"CGROUP_FS=" + c.fs, "CLUSTER_DIR=" + t.TempDir()}, "node-support")
		if got := strings.TrimSpace(out); err != nil || (c.want == "" && got != "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: hack/cluster.sh node-support says %q (%v), want %q", c.machine, got, err, c.want)
		}
	}

	dir, port := t.TempDir(), "17943"
	env := []string{"CGROUP_FS=" + fake(), "CLUSTER_DIR=" + dir, "CLUSTER_PORT=" + port}
	t.Cleanup(func() { _, _ = sh(env, "down") })
	out, err := sh(env, "up")
	if err != nil {
		t.Fatalf("hack/cluster.sh up on a machine with no cgroups: %v\n%s", err, out)
	}
	said := regexp.MustCompile(`(?m)^cluster: no real node can run here \(no cgroup v1 .*\): kwok's nodes only, and the operator runs on this machine`).FindAllString(out, -1)
	if len(said) != 1 || strings.Contains(out, "failed") || strings.Contains(out, "starting node-") {
		t.Errorf("want one line saying why there is no real node, and no node started; got:\n%s", out)
	}
	nodes, err := exec.Command(suite.KubectlBin, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "-o", "name").Output()
	if got := strings.Fields(string(nodes)); err != nil || !slices.Equal(got, []string{"node/kwok-01", "node/kwok-02"}) {
		t.Errorf("the cluster's nodes: %v (%v), want kwok's two alone", got, err)
	}
	if _, err := sh(env, "real-nodes"); err == nil {
		t.Errorf("hack/cluster.sh real-nodes says the cluster has real nodes")
	}
	t.Logf("%s", said[0])
	if out, err := sh(env, "down"); err != nil {
		t.Errorf("hack/cluster.sh down: %v\n%s", err, out)
	}
}

// On cgroup v2 a node runs in a cgroup delegated to it (hack/node.sh, "cgroup
// v2"). This project's machines have cgroup v1, with a cgroup2 beside it whose
// one controller is hugetlb: no kubelet can run on that, but every step of the
// v2 path can, for real, with hugetlb standing for cpu, memory and pids. The
// node's namespaces start (node_ns_up, as `hack/cluster.sh up` starts them)
// in a cgroup of their own, whose controller the root hands down; its
// processes move to the leaf init; its cgroup namespace and its cgroup2 mount
// show the node that cgroup as the root, where the kubelet's /kubepods goes; a
// component starts in init; and nodes_down removes it all and puts the root
// back as it was.
func TestNodeCgroupV2(t *testing.T) {
	root := suite.Root
	fs, controllers := "/sys/fs/cgroup", ""
	if _, err := os.Stat(fs + "/cgroup.controllers"); err != nil {
		fs, controllers = "/sys/fs/cgroup/unified", "hugetlb"
	}
	before, err := os.ReadFile(fs + "/cgroup.subtree_control")
	if err != nil {
		t.Fatalf("no cgroup2 on this machine, at /sys/fs/cgroup or beside cgroup v1: %v", err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-C", filepath.Join(root, "hack", "image"), "-o", filepath.Join(dir, "pause-root", "pause"), "./pause").CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	const script = `
set -euo pipefail
root=$1 dir=$2 api_port=$3
say() { echo "cluster: $*" >&2; }
fail() { say "$1 failed: $2"; exit 1; }
start() { local n=$1; shift; setsid "$@" >"$dir/logs/$n.log" 2>&1 </dev/null & echo $! >"$dir/pids/$n"; } # as hack/cluster.sh's
source "$root/hack/node.sh"
cg() { sed -n 's/^0:://p' "$1"; }
[ "$cgroups" = v2 ] || { echo "hack/node.sh sees cgroup ${cgroups:-nothing} at $cgroup_fs"; exit 1; }
use_node node-01
node_ns_up
c=$(node_cgroup)
echo "cgroup ${c#"$cgroup_fs"}"
echo "holder $(cg /proc/$(node_holder)/cgroup)"
echo "holder, seen from the node $(in_node cat /proc/1/cgroup | sed -n 's/^0:://p')"
echo "processes in the cgroup itself $(wc -l <"$c/cgroup.procs")"
echo "cgroup hands down $(cat "$c/cgroup.subtree_control")"
echo "root hands down $(cat "$cgroup_fs/cgroup.subtree_control")"
echo "the node's /sys/fs/cgroup $(in_node stat -f -c %T /sys/fs/cgroup) handing down $(in_node cat /sys/fs/cgroup/cgroup.subtree_control)"
in_node mkdir /sys/fs/cgroup/kubepods
echo "the node's /kubepods on this machine $(ls -d "$c/kubepods")"
node_bin=/usr/bin start_in_node sleeper sleep 600
for _ in $(seq 50); do [ "$(tr '\0' ' ' <"/proc/$(cat "$dir/pids/sleeper@node-01")/cmdline" | head -c7)" = nsenter ] && break; sleep 0.1; done # in its cgroup once it is nsenter
echo "component $(cg /proc/$(cat "$dir/pids/sleeper@node-01")/cgroup)"
nodes_down
echo "after down: cgroups left $(find "$cgroup_fs" -maxdepth 1 -name "$cgroup_root" | wc -l), files left $(ls "$dir" | grep cgroup | wc -l)"
`
	cmd := exec.Command("bash", "-c", script, "bash", root, dir, "17999")
	cmd.Env = append(os.Environ(), "CGROUP_FS="+fs, "CGROUP_V2_CONTROLLERS="+controllers)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	after, _ := os.ReadFile(fs + "/cgroup.subtree_control")
	if err != nil {
		_ = exec.Command("bash", "-c", `for f in "$1"/pids/node@*; do kill -KILL "$(cat "$f")"; done; sleep 1; find "$2/operador-17999" -depth -type d -exec rmdir {} +`, "bash", dir, fs).Run()
		t.Fatalf("the steps of cgroup v2 failed: %v", err)
	}
	want := controllers
	if want == "" {
		want = "cpu memory pids"
	}
	node := "/operador-17999/node-01"
	for _, line := range []string{
		"cgroup " + node,
		"holder " + node + "/init",
		"holder, seen from the node /init",
		"processes in the cgroup itself 0",
		"the node's /sys/fs/cgroup cgroup2fs",
		"the node's /kubepods on this machine " + fs + node + "/kubepods",
		"component " + node + "/init",
		"after down: cgroups left 0, files left 0",
	} {
		if !strings.Contains(string(out), line+"\n") && !strings.Contains(string(out), line+" ") {
			t.Errorf("want %q", line)
		}
	}
	for _, c := range strings.Fields(want) {
		for _, where := range []string{"cgroup hands down", "root hands down", "handing down"} {
			if !regexp.MustCompile(where + ` .*\b` + c + `\b`).Match(out) {
				t.Errorf("%s: want the %s controller", where, c)
			}
		}
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the root's cgroup.subtree_control was %q, and is %q after down", before, after)
	}
}
