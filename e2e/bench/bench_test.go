package bench

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"operador-promociones/e2e/bench/results"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestBench measures four candidates doing the same job in the same run, as
// ServiceAccounts under API Priority and Fairness: this operator, the lesson's
// operator (testdata/leccion, built from the lesson's own code) as it is and
// written carefully (its -tags careful build), and the best
// plain client (the same writes, made by goroutines as soon as each is
// possible). Runs are interleaved in a shuffled order; every figure is the
// median of its repeats with their range. It asserts behaviour only (zero writes
// when idle, every Promocion Listo), never a time. `make bench` runs it at full
// scale (BENCH_SCALE=full) and writes the report, its data and its plots;
// `make test` runs a small version so that the harness cannot rot.
func TestBench(t *testing.T) {
	sc := smokeScale
	if os.Getenv("BENCH_SCALE") == "full" {
		sc = fullScale
	}
	b := newBench(t, sc, sc.name)
	dir := b.outDir

	only := os.Getenv("BENCH_SECTIONS") // comma-separated: measure these only, beside an earlier run's others
	if only != "" {
		b.joinEarlier(dir)
	}
	var measured []string
	runs := map[string]func(){"recovery": b.recovery, "headline": b.convergence, "contention": b.contention, "scale": b.scale,
		"memory": b.memory, "steady": b.steadyState, "failover": b.failover, "large": b.large, "fsync": b.fsync}
	for _, name := range append(slices.Clone(sections), sectionsApart...) {
		switch {
		case only != "" && !slices.Contains(strings.Split(only, ","), name):
			continue
		case only == "" && sc.name == fullScale.name && slices.Contains(sectionsApart, name):
			continue // make bench-scale's
		}
		measured = append(measured, name)
		b.res.Parts = append(slices.DeleteFunc(b.res.Parts, func(p string) bool { return strings.HasPrefix(p, b.part("")) }), b.part(strings.Join(measured, ", ")))
		start := time.Now()
		runs[name]()
		b.res.Sections = append(b.res.Sections, results.SectionTime{Name: name, Minutes: time.Since(start).Minutes()})
		b.write(dir) // after each section: a run cut short still leaves what it measured
	}
	b.plots(dir)
	var again results.Results // the report must come out the same from the data alone, as `make bench-report` makes it
	if raw, err := os.ReadFile(filepath.Join(dir, "bench-results.json")); err != nil || json.Unmarshal(raw, &again) != nil {
		t.Fatalf("reading back bench-results.json: %v", err)
	}
	if reportOf(&again) != b.report() {
		t.Errorf("the report made from bench-results.json differs from the run's")
	}
	// BENCH_SECTIONS=recovery would measure recovery again: nothing of the earlier one may stay.
	if again.Drop("recovery"); len(again.Recovery)+len(again.Inside) != 0 || strings.Contains(strings.Join(again.Parts, ";"), "recovery") ||
		!strings.Contains(reportOf(&again), "### Recovery of a deleted child\n\nNot measured") {
		t.Errorf("dropping the recovery section left some of it: parts %q, %d samples", again.Parts, len(again.Recovery))
	}
	if file := os.Getenv("BENCH_REPORT"); file != "" {
		if err := framework.Splice(file, "bench", b.report()); err != nil {
			t.Error(err)
		}
	}
	fmt.Println(b.report())
}

// sections are the benchmark's, in the order a run takes them: make bench's,
// then the sections apart (make bench-scale), 10,000 Promociones and the
// headline with etcd syncing to disk, last since it restores the cluster so.
// make test's small run takes them all.
var (
	sections      = []string{"recovery", "headline", "contention", "scale", "memory", "steady", "failover"}
	sectionsApart = []string{"large", "fsync"}
)

// part names this run, its commit, its machine and the sections it measured.
func (b *bench) part(sections string) string {
	return fmt.Sprintf("%s (seed %d, commit %s, %s): %s", b.started.UTC().Format("2006-01-02 15:04 MST"), b.res.Seed, b.res.Commit, b.res.Machine, sections)
}

// joinEarlier takes an earlier run's results from dir, to which this run
// adds the sections it measures; what the earlier run measured of those
// sections is dropped, so that each section comes whole from one run.
func (b *bench) joinEarlier(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "bench-results.json"))
	if err != nil {
		b.T.Fatalf("BENCH_SECTIONS adds to an earlier run's results: %v", err)
	}
	var earlier results.Results
	if err := json.Unmarshal(raw, &earlier); err != nil {
		b.T.Fatal(err)
	}
	for _, name := range strings.Split(os.Getenv("BENCH_SECTIONS"), ",") {
		earlier.Drop(name)
	}
	earlier.Scale, earlier.Machine, earlier.Cluster = b.res.Scale, b.res.Machine, b.res.Cluster
	earlier.Started, earlier.Seed, earlier.Commit = b.res.Started, b.res.Seed, b.res.Commit // the header's; each part names its own commit
	// This run's settings (deploy.yaml's memory limit), not the earlier run's.
	earlier.Notes = append(slices.DeleteFunc(earlier.Notes, func(n string) bool { return strings.HasPrefix(n, "memory-limit=") }), b.memoryLimitNote())
	*b.res = earlier
}

// newBench opens a benchmark run at scale sc, its results named scaleName:
// its seed (BENCH_SEED replays one), its folder (BENCH_OUT, or the test's),
// the candidates' identities and operators, and the cluster saved to restore
// between runs.
func newBench(t *testing.T, sc scale, scaleName string) *bench {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("BENCH_SEED"), 10, 64); err == nil {
		seed = s
	}
	b := &bench{Harness: framework.NewHarness(t, &suite), sc: sc, started: time.Now(), rnd: rand.New(rand.NewPCG(seed, seed)), outDir: cmp.Or(os.Getenv("BENCH_OUT"), t.TempDir()),
		res: &results.Results{Scale: scaleName, Commit: suite.Commit(), Seed: seed, Started: time.Now().UTC()}}
	b.settings()
	b.identities()
	b.makeTemplate()
	b.saveCluster()
	return b
}

// write puts the report and its data into dir.
func (b *bench) write(dir string) {
	b.saveJSON(filepath.Join(dir, "bench-results.json"))
	if err := os.WriteFile(filepath.Join(dir, "bench-results.md"), []byte(b.report()), 0o644); err != nil {
		b.T.Fatal(err)
	}
}

// saveJSON writes the results so far into file, with the time they took.
func (b *bench) saveJSON(file string) {
	b.res.Took = time.Since(b.started).Round(time.Second).String()
	data, err := json.MarshalIndent(b.res, "", " ")
	if err != nil {
		b.T.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		b.T.Fatal(err)
	}
}

// plots draws the report's pictures into dir with hack/plots (its own
// module: gonum stays out of the operator's go.mod), and checks each is there.
func (b *bench) plots(dir string) {
	cmd := exec.Command("go", "run", ".", dir)
	cmd.Dir = filepath.Join(b.Root, "hack", "plots")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.T.Fatalf("hack/plots: %v\n%s", err, out)
	}
	for _, name := range []string{"recovery-ConfigMap", "recovery-Deployment", "recovery-Service", "convergence", "rss"} {
		svg, err := os.ReadFile(filepath.Join(dir, name+".svg"))
		if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "operador-promociones") {
			b.T.Errorf("hack/plots drew no %s.svg with this operator's line in it: %v", name, err)
		}
	}
}

type scale struct {
	name      string
	n         int // the headline's Promociones, created at once
	repeats   int // of each convergence figure, per candidate
	rounds    int // of recovery samples, per candidate
	samples   int // per child kind, per round, idle and under load: the shops of a round
	load      int // Promociones converging during the loaded recovery samples
	scaleNs   []int
	large     int // the N of the section apart, ours alone (make bench-scale)
	unrelated int // 10 KB ConfigMaps of no Promocion, for the memory figure
	flood     int // the flooding client's goroutines
	sideApply int // ConfigMaps a user applies with kubectl during a contended run
	idle      time.Duration
	failovers int
	contended int // runs under contention of ours and the careful lesson
}

var (
	// One repeat: make test runs the smoke to keep every section and the
	// report working, not for figures (two cost 2 minutes of a cold CI run).
	smokeScale = scale{name: "smoke", n: 20, repeats: 1, rounds: 1, samples: 5, load: 20, scaleNs: []int{30}, large: 60,
		unrelated: 200, flood: 2, sideApply: 10, idle: 3 * time.Second, failovers: 1, contended: 1}
	// Three repeats of every figure a goal reads (issue 50). N = 1000 is the
	// headline's; 5000 the scale section's; 10,000 a section apart, whose
	// runs take half an hour (make bench-scale). The workers' count and
	// the pace are the ablation's to weigh (make bench-ablation).
	fullScale = scale{name: "full", n: 1000, repeats: 3, rounds: 3, samples: 200, load: 1000, scaleNs: []int{5000}, large: 10000,
		unrelated: 10000, flood: 4, sideApply: 300, idle: time.Minute, failovers: 5, contended: 3}
)

// candidate is one of the three, as the API server sees it.
type candidate struct {
	key        string
	user       string // its ServiceAccount's username
	kubeconfig string
	binary     string        // "" for the plain client, which runs in the test
	c          client.Client // the plain client's, as its ServiceAccount
	// product: this operator, or a variant of it (the ablation's), run as
	// deploy.yaml runs it; args are flags it always gets.
	product bool
	args    []string
}

type bench struct {
	*framework.Harness
	sc         scale
	started    time.Time
	rnd        *rand.Rand
	res        *results.Results
	candidates map[string]*candidate
	template   *template // what the operator made for one Promocion, copied by the plain client
	flooder    client.Client
	usuario    string // the kubeconfig of a team's user: a ServiceAccount
	persona    string // and of a person of that team (ana, in group equipo-tienda)
	perfil     string // the token of bench-perfil, which may read ours' metrics and profiles
	outDir     string // where the report's data, plots and profiles go
	memLimit   int64  // deploy.yaml's memory limit for the operator, in bytes
}

// ----- the cluster and the machine -----

// settings records each component's command line and the machine.
func (b *bench) settings() {
	b.res.Machine, b.res.Cores = machine(), runtime.NumCPU()
	b.memLimit = b.memoryLimit()
	b.res.Notes = append(b.res.Notes, b.memoryLimitNote())
	for _, name := range clusterComponents {
		b.res.Cluster = append(b.res.Cluster, results.Component{Name: name, Args: b.commandLine(name)})
	}
}

// clusterComponents are the processes of hack/cluster.sh's control plane and
// its kwok nodes, named as in $CLUSTER_DIR/pids.
var clusterComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// processCPU is the CPU time so far of the cluster's components, the operator
// o (if any) and the harness itself.
func (b *bench) processCPU(o *framework.Operator) map[string]float64 {
	cpu := map[string]float64{"harness": cpuOf(b.T, os.Getpid())}
	for _, name := range clusterComponents {
		cpu[name] = cpuOf(b.T, b.componentPid(name))
	}
	if o != nil {
		cpu["operator"] = cpuOf(b.T, o.Cmd.Process.Pid)
	}
	return cpu
}

// componentPid is the process of a cluster component, as hack/cluster.sh
// recorded it.
func (b *bench) componentPid(name string) int {
	raw, err := os.ReadFile(filepath.Join(suite.ClusterDir, "pids", name))
	if err != nil {
		b.T.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		b.T.Fatalf("pids/%s: %v", name, err)
	}
	return pid
}

// commandLine is a cluster component's arguments, read from /proc.
func (b *bench) commandLine(name string) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.componentPid(name)))
	if err != nil {
		b.T.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")[1:]
	return strings.ReplaceAll(strings.Join(args, " "), suite.ClusterDir, "$CLUSTER_DIR")
}

func machine() string {
	mem := "?"
	if f, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(strings.SplitN(string(f), "\n", 2)[0], "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
		}
	}
	model := "?"
	if f, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(f), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s memory, %s", runtime.NumCPU(), model, mem, runtime.Version())
}

// calibrate times a fixed CPU-bound loop: its spread across a run is the
// machine's own noise, against which differences between candidates are read.
func calibrate() float64 {
	buf := make([]byte, 1<<20)
	start := time.Now()
	for range 64 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	return float64(time.Since(start).Microseconds()) / 1000
}

func load1() float64 {
	f, _ := os.ReadFile("/proc/loadavg")
	v, _ := strconv.ParseFloat(strings.Fields(string(f) + " 0")[0], 64)
	return v
}

// identities gives each candidate its ServiceAccount.
func (b *bench) identities() {
	b.Identity("bench-operador")
	rbac, metrics := filepath.Join(b.Root, "e2e", "testdata", "bench-rbac.yaml"), filepath.Join(b.Root, "manifiestos", "metrics.yaml")
	b.Kubectl("apply", "-f", metrics, "-f", rbac)
	b.T.Cleanup(func() { _, _ = b.TryKubectl("delete", "--ignore-not-found", "-f", rbac, "-f", metrics) })
	b.perfil = b.Kubectl("create", "token", "bench-perfil", "-n", "default", "--duration=3h")
	// The careful lesson is the baseline: the lesson's operator as its own
	// words ask it written (issue 50); the lesson as printed, whose every
	// pass rewrites its children, is no longer measured.
	b.candidates = map[string]*candidate{
		results.Ours:    {key: results.Ours, user: "system:serviceaccount:default:bench-operador", binary: suite.Operator, product: true},
		results.Careful: {key: results.Careful, user: "system:serviceaccount:default:bench-leccion-careful", binary: suite.LeccionCareful},
		results.Plain:   {key: results.Plain, user: "system:serviceaccount:default:bench-plain"},
	}
	for sa, c := range map[string]*candidate{"bench-operador": b.candidates[results.Ours], "bench-leccion-careful": b.candidates[results.Careful], "bench-plain": b.candidates[results.Plain]} {
		c.kubeconfig = b.ServiceAccountKubeconfig(sa)
	}
	b.candidates[results.Plain].c = b.ClientFor(b.candidates[results.Plain].kubeconfig)
	b.flooder = b.ClientFor(b.ServiceAccountKubeconfig("bench-flood"))
	b.usuario = b.ServiceAccountKubeconfig("bench-usuario")
	b.persona = b.PersonKubeconfig("ana", "equipo-tienda")
}

// startCandidate starts an operator candidate as its ServiceAccount, watching
// every namespace, and waits until its workers run.
func (b *bench) startCandidate(c *candidate, who string, args ...string) *framework.Operator {
	b.T.Helper()
	o, _ := b.startProfiled(c, who, false, args...)
	return o
}

// startProfiled is startCandidate, serving heap profiles if profiled; it
// returns where they are served. Ours serves them as in production (--pprof,
// over HTTPS behind its metrics authorization, read with bench-perfil's
// token); the lesson baselines on a plain loopback listener (LECCION_PPROF).
func (b *bench) startProfiled(c *candidate, who string, profiled bool, args ...string) (*framework.Operator, string) {
	b.T.Helper()
	args = append(slices.Clone(c.args), args...)
	l := framework.Launch{Who: c.key + "-" + who, Binary: c.binary, Kubeconfig: c.kubeconfig, Args: args, Flagless: slices.Contains(results.Lessons, c.key)}
	if c.product {
		// As in the cluster: deploy.yaml hands the container's memory limit to
		// the Go runtime (main.go's memoryLimit).
		l.Env = []string{fmt.Sprintf("CONTAINER_MEMORY_LIMIT=%d", b.memLimit)}
	}
	var pprof string
	switch {
	case profiled && c.product:
		l.SecureMetrics, l.Args = true, append(slices.Clone(args), "--pprof")
	case profiled:
		pprof = "http://" + framework.FreeAddresses(b.T, 1)[0]
		l.Env = append(l.Env, "LECCION_PPROF="+strings.TrimPrefix(pprof, "http://"))
	}
	o := b.Start(l)
	if l.SecureMetrics {
		o.MetricsToken, pprof = b.perfil, o.MetricsURL
	}
	b.WaitForLog(o, "its workers started", `Starting workers`)
	return o, pprof
}

// profiled says whether a run takes a heap profile: the first scale run of
// ours and of the careful lesson, and the first of ours at the large N.
func (b *bench) profiled(section, key string, repeat int) bool {
	return repeat == 0 && (section == "scale" && (key == results.Ours || key == results.Careful) || section == "large" && key == results.Ours)
}

// heapProfile takes an operator's heap profile at pprof (after a garbage
// collection, so in-use space is what is live), writes it into dir and
// keeps the top of it, by function and by call site.
func (b *bench) heapProfile(o *framework.Operator, pprof string, key string, n int) {
	b.T.Helper()
	get := o.Get
	if o.MetricsURL != pprof {
		get = func(path string) (*http.Response, error) { return http.Get(pprof + path) } //nolint:noctx // loopback, once
	}
	resp, err := get("/debug/pprof/heap?gc=1")
	if err != nil {
		b.T.Fatalf("heap profile of %s: %v", key, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.T.Fatalf("heap profile of %s: %s\n%s", key, resp.Status, raw)
	}
	name := fmt.Sprintf("heap-%s-%d.pb.gz", key, n)
	file := filepath.Join(b.outDir, name)
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		b.T.Fatal(err)
	}
	top := func(extra ...string) (total string, lines []string) {
		out, err := exec.Command("go", append([]string{"tool", "pprof", "-top", "-nodecount=12", "-sample_index=inuse_space"}, append(extra, file)...)...).Output()
		if err != nil {
			b.T.Fatalf("go tool pprof %s: %v", file, err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			switch {
			case strings.HasPrefix(line, "Showing nodes accounting for"):
				_, total, _ = strings.Cut(line, " of ")
				total, _, _ = strings.Cut(total, " total")
			case strings.Contains(line, "%") && !strings.Contains(line, "flat%"):
				lines = append(lines, strings.TrimSpace(line))
			}
		}
		return total, lines
	}
	p := results.HeapProfile{Candidate: key, N: n, File: name}
	p.Total, p.Flat = top()
	_, p.Cum = top("-cum")
	if len(p.Flat) == 0 {
		b.T.Fatalf("go tool pprof shows nothing in %s", file)
	}
	b.res.Profiles = append(b.res.Profiles, p)
}

// memoryLimit is the operator container's memory limit in deploy.yaml, in bytes.
func (b *bench) memoryLimit() int64 {
	raw, err := os.ReadFile(filepath.Join(b.Root, "manifiestos", "deploy.yaml"))
	if err != nil {
		b.T.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			b.T.Fatalf("deploy.yaml: %v", err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return m.Value()
			}
		}
	}
	b.T.Fatal("deploy.yaml sets no memory limit")
	return 0
}

// memoryLimitNote records deploy.yaml's memory limit for the report.
func (b *bench) memoryLimitNote() string { return fmt.Sprintf("memory-limit=%d", b.memLimit) }

// order is the candidates in a fresh random order.
func (b *bench) order(keys ...string) []string {
	if len(keys) == 0 {
		keys = []string{results.Ours, results.Careful, results.Plain}
	}
	out := slices.Clone(keys)
	b.rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// ----- the template the plain client copies -----

// template is what this operator made for one Promocion: the plain client's model.
type template struct {
	promo   *unstructured.Unstructured
	objects []client.Object // the ConfigMap, Deployment and Service, and the Event
}

// makeTemplate lets the operator make one Promocion's children and status.
func (b *bench) makeTemplate() {
	ns := b.Namespace("bench-template")
	o := b.startCandidate(b.candidates[results.Ours], "template")
	b.CreatePromociones(ns, 1, 1)
	b.WaitListo(ns, 1)
	o.Stop(b.T)
	ctx := context.Background()
	p := framework.Promocion(ns, 0, 1)
	var evs eventsv1.EventList
	for _, err := range []error{b.C.Get(ctx, client.ObjectKeyFromObject(p), p), b.C.List(ctx, &evs, client.InNamespace(ns))} {
		if err != nil {
			b.T.Fatal(err)
		}
	}
	b.template = &template{promo: p}
	for _, kind := range b.firstChildren(ns) {
		b.template.objects = append(b.template.objects, kind.obj)
	}
	for i := range evs.Items {
		if e := &evs.Items[i]; e.Regarding.UID == p.GetUID() && e.Reason == "Created" {
			b.template.objects = append(b.template.objects, e)
		}
	}
	if want := len(framework.Children()) + 1; len(b.template.objects) != want {
		b.T.Fatalf("the operator made %d objects for the template Promocion, want %d children and 1 Event", len(b.template.objects), want-1)
	}
	b.DeleteNamespace(ns)
}

// copyFor is obj as the operator would make it for Promocion p: the
// template's names and UID replaced by p's, and what the API server sets cleared.
func (t *template) copyFor(obj client.Object, p *unstructured.Unstructured) client.Object {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	s := strings.NewReplacer(`"`+t.promo.GetNamespace()+`"`, `"`+p.GetNamespace()+`"`,
		string(t.promo.GetUID()), string(p.GetUID()), "promo-0", p.GetName()).Replace(string(raw))
	out := obj.DeepCopyObject().(client.Object)
	if u, ok := out.(*unstructured.Unstructured); ok {
		u.Object = nil
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		panic(err)
	}
	out.SetResourceVersion("")
	out.SetUID("")
	out.SetCreationTimestamp(metav1.Time{})
	out.SetManagedFields(nil)
	out.SetGeneration(0)
	switch o := out.(type) {
	case *unstructured.Unstructured: // a child
		unstructured.RemoveNestedField(o.Object, "status") // the API server's
		switch o.GetKind() {
		case "Deployment":
			if r, ok, _ := unstructured.NestedInt64(p.Object, "spec", "replicas"); ok {
				_ = unstructured.SetNestedField(o.Object, r, "spec", "replicas")
			}
		case "Service":
			unstructured.RemoveNestedField(o.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(o.Object, "spec", "clusterIPs")
		}
	case *eventsv1.Event:
		o.Name, o.GenerateName = "", p.GetName()+"-"
	}
	return out
}

// status is the template's final status, as a merge patch; fase and
// readyReplicas as given.
func (t *template) status(fase string, ready int64) client.Patch {
	st := map[string]any{}
	for k, v := range t.promo.Object["status"].(map[string]any) {
		st[k] = v
	}
	st["fase"], st["readyReplicas"] = fase, ready
	raw, _ := json.Marshal(map[string]any{"status": st})
	return client.RawPatch(types.MergePatchType, raw)
}

// child is one of a Promocion's children, with the list type a watch of it needs.
type child struct {
	name string // its kind
	list client.ObjectList
	obj  client.Object
}

// firstChildren reads every child made for promo-0 in ns (every candidate
// names them alike), in the operator's order.
func (b *bench) firstChildren(ns string) []child {
	var children []child
	for _, c := range framework.Children() {
		obj := c.Object(ns, "promo-0")
		if err := b.C.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			b.T.Fatal(err)
		}
		children = append(children, child{c.Kind, c.List(), obj})
	}
	return children
}

// ----- the plain client -----

// plainConverge does, as the plain client with g goroutines, what an operator
// does for n Promociones in ns: each Promocion (as the user), copies of the
// operator's ConfigMap, Deployment, Service and Event, a status Desplegando;
// then, on a watch of the Deployments, the status Listo of each as soon as its
// Deployment is ready. It returns at once; the Promociones' watch tells when.
func (b *bench) plainConverge(ctx context.Context, ns string, n, replicas, g int) {
	pc := b.candidates[results.Plain].c
	ready := make(chan string, n)
	// Each Promocion's Listo goes after its Desplegando, which closes its channel.
	desplegando := map[string]chan struct{}{}
	for i := range n {
		desplegando[fmt.Sprintf("promo-%d", i)] = make(chan struct{})
	}
	listed := make(chan struct{})
	go func() {
		defer close(ready)
		done := map[string]bool{}
		_ = b.followWith(ctx, pc.(client.WithWatch), &appsv1.DeploymentList{}, ns, listed, func(o client.Object) bool {
			d := o.(*appsv1.Deployment)
			if done[d.Name] || d.Status.ObservedGeneration < d.Generation || d.Status.ReadyReplicas != int32(replicas) {
				return false
			}
			done[d.Name] = true
			ready <- d.Name
			return len(done) == n
		})
	}()
	<-listed
	go func() {
		if err := framework.ParallelErr(n, g, func(i int) error {
			p := framework.Promocion(ns, i, replicas)
			if err := b.C.Create(ctx, p); err != nil {
				return err
			}
			for _, tmpl := range b.template.objects {
				if err := pc.Create(ctx, b.template.copyFor(tmpl, p)); err != nil {
					return err
				}
			}
			defer close(desplegando[p.GetName()])
			return pc.Status().Patch(ctx, p, b.template.status("Desplegando", 0))
		}); err != nil {
			b.T.Errorf("the plain client: %v", err)
		}
	}()
	go func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, g)
		for name := range ready {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				<-desplegando[name]
				p := framework.Promocion(ns, 0, replicas)
				p.SetName(name)
				if err := pc.Status().Patch(ctx, p, b.template.status("Listo", int64(replicas))); err != nil {
					b.T.Errorf("the plain client's status Listo of %s: %v", name, err)
				}
			})
		}
		wg.Wait()
	}()
}

// ----- finish lines -----

// finish is when every Promocion of a namespace was first seen with children
// and a status written (fase set), and then Listo with all replicas ready.
type finish struct{ written, listo time.Time }

// watchFinish follows the Promociones of ns, from now on, and returns when n
// are Listo; it closes seen (if not nil) once seenAt exist. It follows a watch
// rather than polling a list: listing 1000 Promociones every few milliseconds
// would load the API server more for some candidates than for others.
func (b *bench) watchFinish(ctx context.Context, ns string, n, seenAt int, seen chan struct{}) func() (finish, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("tienda.example.com/v1")
	list.SetKind("PromocionList")
	started := make(chan struct{})
	result := make(chan finish, 1)
	go func() {
		var f finish
		written, listo := tally{}, tally{}
		_ = b.follow(ctx, list, ns, started, func(o client.Object) bool {
			p := o.(*unstructured.Unstructured)
			fase, _, _ := unstructured.NestedString(p.Object, "status", "fase")
			ready, _, _ := unstructured.NestedInt64(p.Object, "status", "readyReplicas")
			want, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas")
			written.set(p.GetName(), fase != "")
			listo.set(p.GetName(), fase == "Listo" && ready == want)
			if seen != nil && len(written.of) >= seenAt {
				close(seen)
				seen = nil
			}
			if f.written.IsZero() && written.n == n {
				f.written = time.Now()
			}
			if listo.n == n {
				f.listo = time.Now()
				return true
			}
			return false
		})
		result <- f
	}()
	<-started
	return func() (finish, error) {
		f := <-result
		if f.listo.IsZero() {
			return f, fmt.Errorf("not every one of %d Promociones in %s became Listo", n, ns)
		}
		return f, nil
	}
}

// tally is a set of named booleans that counts its trues as they change: a
// run of 10,000 Promociones sees tens of thousands of events.
type tally struct {
	of map[string]bool
	n  int
}

func (t *tally) set(name string, v bool) {
	if t.of == nil {
		t.of = map[string]bool{}
	}
	if t.of[name] != v {
		t.n += map[bool]int{true: 1, false: -1}[v]
	}
	t.of[name] = v
}

// follow calls f with each object of list's kind in ns: those a list
// returns, then each one a watch shows added or changed, until f returns
// true or ctx ends. An API server may end any watch (a timeout, a slow
// watcher); then it lists and watches again, as an informer does, and says
// so in the log. It closes listed once its first list is done.
func (b *bench) follow(ctx context.Context, list client.ObjectList, ns string, listed chan struct{}, f func(client.Object) bool) error {
	return b.followWith(ctx, b.C, list, ns, listed, f)
}

// followWith is follow, as the user of client c.
func (b *bench) followWith(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, listed chan struct{}, f func(client.Object) bool) error {
	for first := true; ctx.Err() == nil; first = false {
		l := list.DeepCopyObject().(client.ObjectList)
		err := c.List(ctx, l, client.InNamespace(ns))
		if first && listed != nil {
			close(listed)
		}
		if err != nil {
			b.Logf("listing %T in %s: %v", list, ns, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return err
		}
		for _, it := range items {
			if f(it.(client.Object)) {
				return nil
			}
		}
		w, err := c.Watch(ctx, l, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.GetResourceVersion()}})
		if err != nil {
			b.Logf("watching %T in %s: %v", list, ns, err)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				b.Logf("the watch of %T in %s ended: %v", list, ns, ev.Object)
				break
			}
			if o, ok := ev.Object.(client.Object); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) && f(o) {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() == nil {
			b.Logf("watching %T in %s again", list, ns)
		}
	}
	return ctx.Err()
}

// ----- 1. recovery -----

// recovery deletes the children of live shops and times their return, as seen
// on a watch: for the operators, their reconcile; for the plain client, a
// create sent as soon as the delete returns (the physical limit). Each round
// takes the samples idle, one at a time, then all at once while a load of
// Promociones converges: every one of those waits behind the load's backlog,
// unless the candidate puts repairs first.
func (b *bench) recovery() {
	for r := range b.sc.rounds {
		for _, key := range b.order() {
			b.recoveryRound(b.candidates[key], r)
		}
	}
}

func (b *bench) recoveryRound(c *candidate, r int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	defer b.resetCluster("off")
	ns := b.Namespace(fmt.Sprintf("bench-rec-%s-%d", c.key, r))
	b.res.Noise = append(b.res.Noise, results.Noise{Calibration: calibrate(), Load1: load1()})
	// The shops: sc.samples Promociones, live before any child is deleted.
	var o *framework.Operator
	if c.binary != "" {
		o = b.startCandidate(c, fmt.Sprintf("recovery-%d", r))
		defer o.Stop(b.T)
		b.CreatePromociones(ns, b.sc.samples, 0)
	} else {
		b.plainConverge(ctx, ns, b.sc.samples, 0, 32)
	}
	b.WaitListo(ns, b.sc.samples)
	shops := make([]*unstructured.Unstructured, b.sc.samples)
	for i := range shops {
		shops[i] = framework.Promocion(ns, i, 0)
		if err := b.C.Get(ctx, client.ObjectKeyFromObject(shops[i]), shops[i]); err != nil {
			b.T.Fatal(err)
		}
	}
	// The plain client's recreation of child j (in firstChildren's order) of p.
	recreate := func(j int, p *unstructured.Unstructured) func() error {
		if c.binary != "" {
			return nil
		}
		return func() error { return c.c.Create(ctx, b.template.copyFor(b.template.objects[j], p)) }
	}
	record := func(kind string, loaded, converging bool, d time.Duration) {
		b.res.Recovery = append(b.res.Recovery, results.RecoverySample{Candidate: c.key, Kind: kind, Loaded: loaded, Converging: converging, Round: r, Ms: float64(d.Microseconds()) / 1000})
	}

	// Idle: one shop's children, one deletion at a time.
	kinds := b.firstChildren(ns)
	before := b.insideOf(o)
	for range b.sc.samples {
		for j, k := range kinds {
			record(k.name, false, false, framework.RecreationTime(b.T, b.C, k.list, k.obj.DeepCopyObject().(client.Object), recreate(j, shops[0])))
			time.Sleep(20 * time.Millisecond) // each recovery alone, not in the wake of the last
		}
	}
	b.inside(o, c, r, false, before)

	// Under load: sc.load Promociones created at once in another namespace and,
	// once they all exist, every shop loses its three children at once.
	loadNS := b.Namespace(fmt.Sprintf("bench-rec-load-%s-%d", c.key, r))
	seen := make(chan struct{})
	// The burst starts once the load's Promociones all exist, with an
	// operator's backlog of them ahead; the plain client makes each one's
	// children as it makes it, so its burst starts a tenth of the way in,
	// while the rest of its load is still being written: each candidate's
	// repairs are timed while its own load runs.
	seenAt := b.sc.load
	if c.binary == "" {
		seenAt = max(1, b.sc.load/10)
	}
	done := b.watchFinish(ctx, loadNS, b.sc.load, seenAt, seen)
	var converged atomic.Pointer[time.Time]
	go func() {
		f, err := done()
		if err != nil {
			b.T.Error(err)
			return
		}
		converged.Store(&f.listo)
	}()
	if c.binary != "" {
		go func() {
			if err := framework.ParallelErr(b.sc.load, 32, func(i int) error {
				return b.C.Create(ctx, framework.Promocion(loadNS, i, 0))
			}); err != nil {
				b.T.Errorf("creating the load: %v", err)
			}
		}()
	} else {
		b.plainConverge(ctx, loadNS, b.sc.load, 0, 32)
	}
	select {
	case <-seen:
	case <-ctx.Done():
		b.T.Fatalf("the load's %d Promociones were not all created", b.sc.load)
	}
	before = b.insideOf(o)
	samples := b.burst(ctx, ns, shops, recreate)
	b.inside(o, c, r, true, before)
	b.WaitFor("the load converged", 10*time.Minute, 100*time.Millisecond, func() error {
		if converged.Load() == nil {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	for _, s := range samples {
		record(s.kind, true, s.back.Before(*converged.Load()), s.took)
	}
}

type burstSample struct {
	kind string
	took time.Duration
	back time.Time
}

// burst deletes the three children of every shop at once (32 at a time) and
// returns, for each, the time from its delete to the first sight of the new
// object (another UID) on a watch.
func (b *bench) burst(ctx context.Context, ns string, shops []*unstructured.Unstructured, recreate func(int, *unstructured.Unstructured) func() error) []burstSample {
	kinds := b.firstChildren(ns)
	type key struct{ kind, name string }
	var mu sync.Mutex
	old := map[key]types.UID{}
	started := map[key]time.Time{}
	for _, k := range kinds {
		list := k.list.DeepCopyObject().(client.ObjectList)
		if err := b.C.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.T.Fatal(err)
		}
		items, _ := meta.ExtractList(list)
		for _, it := range items {
			o := it.(client.Object)
			old[key{k.name, o.GetName()}] = o.GetUID()
		}
	}
	var out []burstSample
	var watching, back sync.WaitGroup
	for _, k := range kinds {
		listed := make(chan struct{})
		back.Go(func() {
			n := 0
			_ = b.follow(ctx, k.list, ns, listed, func(o client.Object) bool {
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				id := key{k.name, o.GetName()}
				if t, ok := started[id]; ok && o.GetUID() != old[id] {
					out = append(out, burstSample{kind: k.name, took: now.Sub(t), back: now})
					delete(started, id)
					n++
				}
				return n == len(shops)
			})
		})
		watching.Go(func() { <-listed })
	}
	watching.Wait()
	order := b.rnd.Perm(len(shops))
	if err := framework.ParallelErr(len(shops), 32, func(i int) error {
		p := shops[order[i]]
		for j, k := range kinds {
			obj := k.obj.DeepCopyObject().(client.Object)
			obj.SetName(strings.Replace(obj.GetName(), "promo-0", p.GetName(), 1))
			obj.SetResourceVersion("")
			mu.Lock()
			started[key{k.name, obj.GetName()}] = time.Now()
			mu.Unlock()
			if err := b.C.Delete(ctx, obj); err != nil {
				return err
			}
			if re := recreate(j, p); re != nil {
				if err := re(); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		b.T.Fatalf("the burst of deletions: %v", err)
	}
	back.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(out) != len(kinds)*len(shops) {
		b.T.Fatalf("%d of the burst's %d children came back", len(out), len(kinds)*len(shops))
	}
	return out
}

// inside records where operator o's time went since the totals before: the
// means per reconcile of every reconcile in between (under load, the load's
// and the repairs' alike).
func (b *bench) inside(o *framework.Operator, c *candidate, round int, loaded bool, before results.Inside) {
	if o == nil {
		return
	}
	after := b.insideOf(o)
	n := after.Reconciles - before.Reconciles
	gets, requests := after.Gets-before.Gets, after.Requests-before.Requests
	b.res.Inside = append(b.res.Inside, results.Inside{Candidate: c.key, Round: round, Loaded: loaded, Reconciles: n,
		QueuedMs: (after.QueuedMs - before.QueuedMs) / n, ReconcileMs: (after.ReconcileMs - before.ReconcileMs) / n,
		WaitMs: (after.WaitMs - before.WaitMs) / max(gets, 1), Gets: gets,
		APIMs: (after.APIMs - before.APIMs) / max(requests, 1), Requests: requests})
}

// insideOf reads the totals that inside's means are made of (nil: none).
func (b *bench) insideOf(o *framework.Operator) results.Inside {
	if o == nil {
		return results.Inside{}
	}
	sum := func(name string, match func(string) bool) float64 { return o.Metric(name, match) }
	ours := func(l string) bool {
		return strings.Contains(l, `controller="promocion"`) || strings.Contains(l, `name="promocion"`)
	}
	gets := func(l string) bool { return strings.Contains(l, `operation="get"`) }
	return results.Inside{
		Reconciles:  sum("controller_runtime_reconcile_time_seconds_count", ours),
		QueuedMs:    1000 * sum("workqueue_queue_duration_seconds_sum", ours),
		ReconcileMs: 1000 * sum("controller_runtime_reconcile_time_seconds_sum", ours),
		WaitMs:      1000 * sum("controller_runtime_client_consistency_wait_duration_seconds_sum", gets),
		Gets:        sum("controller_runtime_client_consistency_wait_duration_seconds_count", gets),
		APIMs:       1000 * sum("rest_client_request_duration_seconds_sum", nil),
		Requests:    sum("rest_client_request_duration_seconds_count", nil),
	}
}

// overlap is how long the spans [a0, a1] and [b0, b1] have in common.
func overlap(a0, a1, b0, b1 time.Time) time.Duration {
	if b0.After(a0) {
		a0 = b0
	}
	if b1.Before(a1) {
		a1 = b1
	}
	return max(a1.Sub(a0), 0)
}

// ----- 2. convergence -----

// converge is one run: n Promociones with replicas created at once in a fresh
// namespace, handled by candidate c, followed until every one is Listo. during,
// if set, runs beside it and returns what it measured.
func (b *bench) converge(section string, c *candidate, n, replicas, repeat int, variant string, args []string, during func(*results.Run)) results.Run {
	return b.convergeThen(section, c, n, replicas, repeat, variant, args, during, "off")
}

// convergeThen is converge, with etcdFsync ("on" or "off") for the cluster
// that the next run starts from.
func (b *bench) convergeThen(section string, c *candidate, n, replicas, repeat int, variant string, args []string, during func(*results.Run), etcdFsync string) results.Run {
	b.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("bench-%s-%s-%d-%d", section, c.key, n, repeat)
	if variant != "" { // flags make too long a name (63 characters at most): a digest of them
		ns += fmt.Sprintf("-%x", sha256.Sum256([]byte(variant)))[:9]
	}
	b.Namespace(ns)
	r := results.Run{Section: section, Candidate: c.key, Variant: variant, N: n, Replicas: replicas, Repeat: repeat, Calibration: calibrate(), Load1: load1()}
	var o *framework.Operator
	var pprof string
	profiled := b.profiled(section, c.key, repeat)
	if c.binary != "" {
		o, pprof = b.startProfiled(c, fmt.Sprintf("%s-%d-%d", section, n, repeat), profiled, args...)
	}
	auditFrom := b.AuditSize()
	requests := b.apiRequests()
	wait := b.watchFinish(ctx, ns, n, n, nil)
	cpuFrom := b.processCPU(o)
	var side sync.WaitGroup
	if during != nil {
		side.Go(func() { during(&r) })
	}
	start := time.Now()
	if o != nil {
		b.CreatePromociones(ns, n, replicas)
	} else {
		b.plainConverge(ctx, ns, n, replicas, 32)
	}
	f, err := wait()
	if err != nil {
		b.T.Fatal(err)
	}
	r.Written, r.Listo = f.written.Sub(start).Seconds(), f.listo.Sub(start).Seconds()
	r.CPUToListo = b.processCPU(o)
	for name, from := range cpuFrom {
		r.CPUToListo[name] -= from
	}
	side.Wait()
	if o != nil {
		b.WaitIdle(o)
		r.CPUSeconds = cpuOf(b.T, o.Cmd.Process.Pid)
		r.PeakMiB, _ = o.RSS(b.T)
		time.Sleep(5 * time.Second) // the measurement: memory once the burst has passed
		_, r.SettledMiB = o.RSS(b.T)
		r.AnonMiB, r.FileMiB = o.RSSParts(b.T)
		if profiled {
			b.heapProfile(o, pprof, c.key, n)
		}
	}
	r.APIRequests = b.apiRequests() - requests
	b.AuditFlushed()
	var inFlight time.Duration // of the candidate's writes, while the users applied
	for _, w := range b.AuditFrom(auditFrom, func(r framework.Request) bool { return r.User == c.user }) {
		inFlight += overlap(w.At, w.Done, r.Applying[0], r.Applying[1])
		switch res, _, _ := strings.Cut(w.Object, "/"); {
		case w.Code == 409:
			r.Conflicts++
		case w.Code >= 300:
		case strings.HasSuffix(w.URI, "/status"):
			r.Status++
		case res == "events":
			r.Events++
		case res == "leases":
			r.Leases++
		case res == "configmaps" || res == "deployments" || res == "services":
			r.Children++
			if w.Verb != "create" {
				r.ChildUpdates++
			}
		default:
			r.Other++
		}
	}
	if applying := r.Applying[1].Sub(r.Applying[0]); applying > 0 {
		r.InFlight = new(inFlight.Seconds() / applying.Seconds())
	}
	if o != nil {
		o.Stop(b.T)
	}
	b.resetCluster(etcdFsync)
	b.res.Runs = append(b.res.Runs, r)
	b.Logf("%s %s n=%d %s: written %.1f s, Listo %.1f s, %d+%d writes", section, c.key, n, variant, r.Written, r.Listo, r.Children, r.Status)
	return r
}

// convergence is the headline: n Promociones of 1 replica, to Listo, each
// candidate sc.repeats times in a shuffled order.
func (b *bench) convergence() {
	for r := range b.sc.repeats {
		for _, key := range b.order() {
			b.converge("headline", b.candidates[key], b.sc.n, 1, r, "", nil, nil)
		}
	}
}

// contention runs the headline once per candidate while a flooding client
// lists ConfigMaps as fast as it is answered, and a team's user applies
// ConfigMaps with kubectl; then this operator with other limits (sc.limits),
// to choose its defaults from what they cost the user.
func (b *bench) contention() {
	type try struct {
		key     string
		variant string
		repeat  int
	}
	tries := []try{{results.Plain, "", 0}}
	for r := range b.sc.contended {
		tries = append(tries, try{results.Ours, "", r}, try{results.Careful, "", r})
	}
	b.rnd.Shuffle(len(tries), func(i, j int) { tries[i], tries[j] = tries[j], tries[i] })
	for i, tr := range tries {
		b.floodData()
		b.converge("contention", b.candidates[tr.key], b.sc.n, 1, tr.repeat, tr.variant, strings.Fields(tr.variant), func(r *results.Run) {
			before := b.apfWaits()
			r.SideApply, r.SideApplyPerson, r.Applying = b.sideApply(fmt.Sprintf("bench-usuario-%d", i))
			r.APF = results.APFSince(b.apfWaits(), before)
		})
	}
	// The same flood and applies, with no candidate: what the users' applies take alone.
	b.floodData()
	sa, person, _ := b.sideApply("bench-usuario-solo")
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("alone-apply=%.2f", sa), fmt.Sprintf("alone-apply-person=%.2f", person))
	b.resetCluster("off")
}

// floodData is what the flooding client lists: 1000 ConfigMaps of 10 KB.
func (b *bench) floodData() {
	ns := b.Namespace("bench-flood-data")
	page := strings.Repeat("x", 10*1024)
	b.Parallel(1000, 32, func(i int) error {
		return b.C.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%d", i), Namespace: ns}, Data: map[string]string{"data": page}})
	})
}

// sideApply floods the API server with lists as the flooding client and, a
// second in, times two users of a team applying ConfigMaps with kubectl at the
// same time, each into a namespace of its own: a ServiceAccount (in API
// Priority and Fairness's workload-low, with the operators) and a person (in
// global-default). It returns their seconds, and when they began and the
// last ended (the flood's rate goes to the log).
func (b *bench) sideApply(ns string) (sa, person float64, applying [2]time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	var lists atomic.Int64
	var wg sync.WaitGroup
	for range b.sc.flood {
		wg.Go(func() {
			for ctx.Err() == nil {
				var l corev1.ConfigMapList
				if b.flooder.List(ctx, &l, client.InNamespace("bench-flood-data")) == nil {
					lists.Add(1)
				}
			}
		})
	}
	saApply, personApply := b.kubectlApply(b.usuario, ns), b.kubectlApply(b.persona, ns+"-persona")
	time.Sleep(time.Second)
	var applies sync.WaitGroup
	applying[0] = time.Now()
	applies.Go(func() { sa = saApply() })
	applies.Go(func() { person = personApply() })
	applies.Wait()
	applying[1] = time.Now()
	cancel()
	wg.Wait()
	b.Logf("%s: the users' apply of %d ConfigMaps took %.1f s (ServiceAccount) and %.1f s (person); the flood got %.0f lists/s",
		ns, b.sc.sideApply, sa, person, float64(lists.Load())/(max(sa, person)+1))
	return sa, person, applying
}

// kubectlApply makes namespace ns and a file of sc.sideApply ConfigMaps in
// it, and returns what times `kubectl apply` of that file as the user of
// kubeconfig (safe to call on another goroutine).
func (b *bench) kubectlApply(kubeconfig, ns string) (seconds func() float64) {
	b.Namespace(ns)
	var objs strings.Builder
	for i := range b.sc.sideApply {
		fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: usuario-%d, namespace: %s}\ndata: {k: v}\n", i, ns)
	}
	file := filepath.Join(b.Tmp, ns+".yaml")
	if err := os.WriteFile(file, []byte(objs.String()), 0o644); err != nil {
		b.T.Fatal(err)
	}
	return func() float64 {
		start := time.Now()
		cmd := exec.Command(b.KubectlBin, "apply", "-f", file)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.T.Errorf("kubectl apply as %s: %v\n%s", filepath.Base(kubeconfig), err, out)
		}
		return time.Since(start).Seconds()
	}
}

// ----- 4. scale -----

// scale runs ours and the careful lesson at each N, sc.repeats times, with
// replicas 0 (kwok's two nodes take 4000 Pods; with replicas 0 Listo needs
// no Pod), shuffled in each repeat.
func (b *bench) scale() {
	for r := range b.sc.repeats {
		for _, n := range b.sc.scaleNs {
			for _, key := range b.order(results.Ours, results.Careful) {
				b.converge("scale", b.candidates[key], n, 0, r, "", nil, nil)
			}
		}
	}
}

// large runs ours alone at sc.large, sc.repeats times, replicas 0: its
// memory there, against the limit deploy.yaml ships.
func (b *bench) large() {
	for r := range b.sc.repeats {
		b.converge("large", b.candidates[results.Ours], b.sc.large, 0, r, "", nil, nil)
	}
}

// fsync runs the headline once per candidate with etcd syncing every write to
// disk, as in production; the last run puts etcd back as the rest had it.
func (b *bench) fsync() {
	b.resetCluster("on")
	b.res.Notes = append(b.res.Notes, "fsync-etcd="+b.commandLine("etcd"))
	order := b.order()
	for i, key := range order {
		next := map[bool]string{true: "off", false: "on"}[i == len(order)-1]
		b.convergeThen("fsync", b.candidates[key], b.sc.n, 1, 0, "", nil, nil, next)
	}
}

// saveCluster keeps the cluster as it is now (hack/cluster.sh save): each
// run starts from it, the same for every candidate, restored in seconds where
// deleting a run's thousands of objects took a minute.
func (b *bench) saveCluster() {
	// An earlier test's probe (TestAblation runs before TestBench, on the
	// same cluster) is not part of the start: each restore makes its own.
	b.Kubectl("delete", "namespace", probeNamespace, "--ignore-not-found", "--timeout=2m")
	b.clusterSh("save", "")
}

// probeNamespace holds the probe Deployment of resetCluster.
const probeNamespace = "bench-probe"

// resetCluster puts the saved cluster back, etcd syncing to disk if fsync is
// "on", and waits until the control plane has made a probe Deployment's Pod
// Ready: the next run starts on a cluster whose every part works.
func (b *bench) resetCluster(fsync string) {
	b.clusterSh("restore", fsync)
	ctx := context.Background()
	ns := b.Namespace(probeNamespace)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}}}}}
	if err := b.C.Create(ctx, d); err != nil {
		b.T.Fatal(err)
	}
	const what = "the control plane makes a Deployment's Pod Ready after the restore"
	start := time.Now()
	err := framework.Poll(framework.WaitTimeout, 100*time.Millisecond, func() error {
		if err := b.C.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 {
			return b.podsOf(ctx, ns)
		}
		return nil
	}) // it stays: one Deployment, the same in every run
	if err != nil {
		// Which part of the control plane did not come back: the probe's
		// objects and events, the nodes and their Leases, the logs' ends.
		b.LogKubectl(
			[]string{"get", "deployment,replicaset,pod", "-n", ns, "-o", "wide"},
			[]string{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
			[]string{"get", "nodes,leases", "-n", "kube-node-lease", "-o", "wide"},
		)
		b.LogControlPlane(10)
		// The Pods' state first: CI's summary of a failure keeps 200 characters of a line.
		b.T.Fatalf("%v, %s after %s", err, what, framework.WaitTimeout)
	}
	b.Logf("ok: %s, in %.1f s", what, time.Since(start).Seconds())
}

// podsOf says where each Pod of namespace ns stands: its node, its phase and
// its conditions that are not true, with their reasons.
func (b *bench) podsOf(ctx context.Context, ns string) error {
	var pods corev1.PodList
	if err := b.C.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return errors.New("no Pod")
	}
	var says []string
	for _, p := range pods.Items {
		state := fmt.Sprintf("Pod on %q %s", p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				state += fmt.Sprintf(", %s %s (%s)", c.Type, c.Status, c.Reason)
			}
		}
		says = append(says, state)
	}
	return errors.New(strings.Join(says, "; "))
}

func (b *bench) clusterSh(verb, fsync string) {
	cmd := suite.ClusterSh(verb)
	if fsync != "" {
		cmd.Env = append(cmd.Env, "ETCD_FSYNC="+fsync)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.T.Fatalf("hack/cluster.sh %s: %v\n%s", verb, err, out)
	}
	b.Eventually("the API server answers after hack/cluster.sh "+verb, func() error {
		return b.C.List(context.Background(), &corev1.NamespaceList{})
	})
}

// ----- 5. memory -----

// memory starts each operator, and this one without cache scoping (the
// ablation's variant sin-alcance),
// with sc.unrelated 10 KB ConfigMaps of no Promocion in the cluster, and
// reads its memory once its caches are synced.
func (b *bench) memory() {
	v, _ := framework.AblationVariant("sin-alcance")
	unscoped := *b.candidates[results.Ours]
	unscoped.binary = suite.BuildVariant(b.T, b.Tmp, v.Key, v.Edits...)
	variants := map[string]*candidate{results.Ours: b.candidates[results.Ours], results.Careful: b.candidates[results.Careful], "unscoped": &unscoped}
	measure := func(section string) {
		for r := range b.sc.repeats {
			for _, v := range b.order(results.Ours, results.Careful, "unscoped") {
				c := variants[v]
				o := b.startCandidate(c, "memory")
				time.Sleep(5 * time.Second) // the measurement: memory once synced and settled
				peak, settled := o.RSS(b.T)
				anon, file := o.RSSParts(b.T)
				cpu := cpuOf(b.T, o.Cmd.Process.Pid)
				o.Stop(b.T)
				b.res.Runs = append(b.res.Runs, results.Run{Section: section, Candidate: c.key, Variant: map[bool]string{true: "unscoped"}[v == "unscoped"], Repeat: r,
					PeakMiB: peak, SettledMiB: settled, AnonMiB: anon, FileMiB: file, CPUSeconds: cpu, Calibration: calibrate(), Load1: load1()})
			}
		}
	}
	measure("memory-empty")
	ns := b.Namespace("bench-ajenas")
	page := strings.Repeat("x", 10*1024)
	b.Parallel(b.sc.unrelated, 32, func(i int) error {
		return b.C.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ajena-%d", i), Namespace: ns}, Data: map[string]string{"data": page}})
	})
	measure("memory-unrelated")
	b.resetCluster("off")
}

// ----- 6. steady state and failover -----

// steadyState converges sc.n Promociones with this operator, then starts a
// fresh one on them: its resync and an idle while must cost zero writes.
func (b *bench) steadyState() {
	ours := b.candidates[results.Ours]
	ns := b.Namespace("bench-steady")
	o := b.startCandidate(ours, "steady-first")
	b.CreatePromociones(ns, b.sc.n, 0)
	b.WaitListo(ns, b.sc.n)
	b.WaitIdle(o)
	o.Stop(b.T)

	o = b.startCandidate(ours, "steady")
	b.WaitMetric(o, "controller_runtime_reconcile_total", float64(b.sc.n))
	b.WaitIdle(o)
	resync := o.Writes()
	before := o.Writes()
	time.Sleep(b.sc.idle) // the measurement itself: writes while nothing happens
	idle := o.Writes() - before
	o.Stop(b.T)
	if resync != 0 || idle != 0 {
		b.T.Errorf("a fresh operator sent %v writes resyncing %d converged Promociones and %v while idle for %s, want 0", resync, b.sc.n, idle, b.sc.idle)
	}
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("steady=%v/%v/%s", resync, idle, b.sc.idle))
}

// failover runs two replicas of this operator with leader election over the
// converged Promociones of steadyState, stops the leader (SIGKILL, or SIGTERM
// which releases the Lease) and times until the other's first reconcile;
// with and without --leader-elect-warmup.
func (b *bench) failover() {
	ours := b.candidates[results.Ours]
	args := []string{"--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	for range b.sc.failovers {
		for _, kill := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
			for _, warm := range b.rnd.Perm(2) {
				a := append(slices.Clone(args), fmt.Sprintf("--leader-elect-warmup=%t", warm == 1))
				leader := b.Start(framework.Launch{Who: "failover-leader", Kubeconfig: ours.kubeconfig, Args: a})
				b.WaitMetric(leader, "controller_runtime_reconcile_total", 1)
				standby := b.Start(framework.Launch{Who: "failover-standby", Kubeconfig: ours.kubeconfig, Args: a})
				b.WaitFor("the standby is up", framework.WaitTimeout, 20*time.Millisecond, func() error {
					if standby.Metric("controller_runtime_reconcile_total", nil) < 0 {
						return fmt.Errorf("no metrics yet")
					}
					return nil
				})
				time.Sleep(2 * time.Second) // paces the kill: a standby long up, its cache synced if it warms up
				killed := time.Now()
				_ = leader.Cmd.Process.Signal(kill)
				<-leader.Done
				took := b.WaitMetric(standby, "controller_runtime_reconcile_total", 1).Sub(killed)
				b.res.Failover = append(b.res.Failover, results.FailoverRun{Kill: map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM"}[kill], Warmup: warm == 1, Ms: float64(took.Microseconds()) / 1000})
				standby.Stop(b.T)
			}
		}
	}
	b.resetCluster("off")
}

// ----- helpers -----

// cpuOf is a process's user and system CPU time so far.
func cpuOf(t testing.TB, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's name (which is in parentheses): utime is the 12th, stime the 13th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// apiRequests is the API server's count of requests served so far.
func (b *bench) apiRequests() float64 {
	sum := 0.0
	b.apiserverMetrics(func(name, _ string, v float64) {
		if name == "apiserver_request_total" {
			sum += v
		}
	})
	return sum
}

// apfWaits reads, per API Priority and Fairness priority level, the total
// time requests waited in its queues and how many requests it let through.
func (b *bench) apfWaits() map[string]results.APFWait {
	out := map[string]results.APFWait{}
	level := regexp.MustCompile(`priority_level="([^"]+)"`)
	b.apiserverMetrics(func(name, labels string, v float64) {
		m := level.FindStringSubmatch(labels)
		if m == nil {
			return
		}
		w := out[m[1]]
		switch name {
		case "apiserver_flowcontrol_request_wait_duration_seconds_sum":
			w.Ms += 1000 * v
		case "apiserver_flowcontrol_request_wait_duration_seconds_count":
			w.Requests += v
		default:
			return
		}
		out[m[1]] = w
	})
	return out
}

// apiserverMetrics calls f with each sample of the API server's /metrics.
func (b *bench) apiserverMetrics(f func(name, labels string, v float64)) {
	raw, err := b.TryKubectl("get", "--raw", "/metrics")
	if err != nil {
		b.T.Fatal(err)
	}
	for line := range strings.SplitSeq(raw, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[sp+1:], 64)
		name, labels, _ := strings.Cut(line[:sp], "{")
		f(name, labels, v)
	}
}

func percentile(sorted []float64, p float64) float64 {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func medianOf(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// fig is a figure's median and range over its repeats.
type fig struct {
	med, lo, hi float64
	n           int // how many figures: 0 when not measured
}

func figOf(fs []float64) fig {
	if len(fs) == 0 {
		return fig{}
	}
	return fig{medianOf(fs), slices.Min(fs), slices.Max(fs), len(fs)}
}

// overlaps says whether either median lies within the other's range: then
// the repeats show no difference between the two.
func (f fig) overlaps(g fig) bool {
	return (f.med >= g.lo && f.med <= g.hi) || (g.med >= f.lo && g.med <= f.hi)
}
