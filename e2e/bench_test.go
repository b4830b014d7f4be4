package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBench measures what users choosing an operator ask about (recovery after
// a deletion, convergence of many objects beside a plain client doing the same
// writes, the cost of doing nothing, memory, start-up) and prints a Markdown
// table. It asserts only behaviour (zero writes in the steady state), never a
// time. `make bench` runs it at full scale (BENCH_SCALE=full); `make test` runs
// a small version so the harness cannot rot.
func TestBench(t *testing.T) {
	sc := smokeScale
	if os.Getenv("BENCH_SCALE") == "full" {
		sc = fullScale
	}
	b := &bench{lesson: newLesson(t), sc: sc, started: time.Now()}
	help, _ := exec.Command(env.operator, "-help").CombinedOutput()
	if m := regexp.MustCompile(`-max-concurrent-reconciles int\n[^\n]*\(default (\d+)\)`).FindSubmatch(help); m == nil || string(m[1]) != strconv.Itoa(defaultConcurrency) {
		t.Fatalf("the report names %d concurrent reconciles the default; the operator's -help says:\n%s", defaultConcurrency, help)
	}

	b.recovery()
	b.makeTemplate()
	b.convergence()
	b.steadyStateAndStartUp()
	b.memory()

	report := b.report()
	fmt.Println(report)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

type scale struct {
	name          string
	ns            []int // Promociones created at once
	repeats       int
	deletions     int
	concurrencies []int // concurrent reconciles
	goroutines    []int // the plain-client baseline's; the best one is the baseline
	unrelated     int   // unrelated 10 KB ConfigMaps for the memory figure
	idle          time.Duration
	settle        time.Duration // after each deletion, and before reading memory
}

// defaultConcurrency is the operator's --max-concurrent-reconciles default,
// which every operator in the benchmark uses except where a convergence row
// names another number.
const defaultConcurrency = 16

var (
	smokeScale = scale{"smoke", []int{20}, 1, 5, []int{1, defaultConcurrency}, []int{16, 32}, 200, 5 * time.Second, time.Second}
	fullScale  = scale{"full", []int{100, 300, 1000}, 3, 50, []int{1, 4, 16, 32}, []int{8, 16, 32}, 10000, time.Minute, 10 * time.Second}
)

type bench struct {
	*lesson
	sc       scale
	started  time.Time
	template *template // what the operator made for one Promocion, copied by the baseline
	rows     []string  // the report's table rows
	goals    []string
}

func (b *bench) row(format string, args ...any) {
	b.rows = append(b.rows, fmt.Sprintf(format, args...))
	b.logf("%s", b.rows[len(b.rows)-1])
}

// ----- 1. recovery -----

// recovery deletes each child of a Promocion and times the operator making it
// again. Beside it, the physical limit: a plain client creating a copy of the
// same child as soon as its delete returns, in a namespace no operator
// watches, with the deletions of both taken in turn.
func (b *bench) recovery() {
	ctx := context.Background()
	ns, baseNS := b.namespace("bench-recovery"), b.namespace("bench-recovery-base")
	o := b.startBench("recovery", defaultConcurrency, "--namespace="+ns)
	b.createPromociones(ns, 1, 1)
	b.waitConverged(ns, 1)
	b.waitListo(ns, 1)
	src := &template{promo: promocion(ns, 0, 1)}
	base := promocion(baseNS, 0, 1) // the owner of the copies, so that the garbage collector keeps them
	for _, err := range []error{b.c.Get(ctx, client.ObjectKeyFromObject(src.promo), src.promo), b.c.Create(ctx, base)} {
		if err != nil {
			b.t.Fatal(err)
		}
	}
	kinds := b.firstChildren(ns)
	for _, kind := range kinds {
		if err := b.c.Create(ctx, src.copyFor(kind.obj, base)); err != nil {
			b.t.Fatal(err)
		}
	}
	b.eventually("the copied Deployment is ready", func() error {
		var d appsv1.Deployment
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: baseNS, Name: "promo-0"}, &d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 1 {
			return fmt.Errorf("%d ready replicas", d.Status.ReadyReplicas)
		}
		return nil
	})
	for _, kind := range kinds {
		copyOf := func() client.Object { return src.copyFor(kind.obj, base) }
		var op, plain []time.Duration
		for range b.sc.deletions {
			op = append(op, recreationTime(b.t, b.c, kind.list, kind.obj.DeepCopyObject().(client.Object), nil))
			time.Sleep(b.sc.settle / 10) // measure each recovery alone, not in the wake of the last
			plain = append(plain, recreationTime(b.t, b.c, kind.list, copyOf(), func() error { return b.c.Create(ctx, copyOf()) }))
			time.Sleep(b.sc.settle / 10)
		}
		slices.Sort(op)
		slices.Sort(plain)
		p50, p95 := percentile(op, 0.50), percentile(op, 0.95)
		b.row("| Recovery of a deleted %s (%d deletions) | p50 %s, p95 %s, max %s | a plain client creating it again at once: p50 %s, p95 %s, max %s; the lesson's `sleep 5` loop: mean 2.5 s, max 5 s |",
			kind.name, len(op), ms(p50), ms(p95), ms(op[len(op)-1]), ms(percentile(plain, 0.50)), ms(percentile(plain, 0.95)), ms(plain[len(plain)-1]))
		if kind.name == "Deployment" {
			b.goal("Recovery p95 under 25 ms", p95 < 25*time.Millisecond, "p95 "+ms(p95))
		}
	}
	o.stop(b.t)
	b.deleteNamespace(baseNS)
}

// recreationTime deletes obj and returns the time until the watch shows a new
// one (another UID): the operator's, or the one recreate makes once the
// delete has returned.
func recreationTime(t *testing.T, c client.WithWatch, list client.ObjectList, obj client.Object, recreate func() error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	old := obj.GetUID()
	w, err := c.Watch(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: obj.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	if recreate != nil {
		if err := recreate(); err != nil {
			t.Fatal(err)
		}
	}
	for ev := range w.ResultChan() {
		if o, ok := ev.Object.(client.Object); ok && ev.Type == watch.Added && o.GetUID() != old {
			return time.Since(start)
		}
	}
	t.Fatalf("%s %s did not come back within %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), timeout)
	return 0
}

// child is one of a Promocion's children, with the list type a watch of it needs.
type child struct {
	name string // its kind
	list client.ObjectList
	obj  client.Object
}

// firstChildren reads the ConfigMap, Deployment and Service that the operator
// made for promo-0 in ns, in the order it makes them.
func (b *bench) firstChildren(ns string) []child {
	children := []child{
		{"ConfigMap", &corev1.ConfigMapList{}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promo-0-html"}}},
		{"Deployment", &appsv1.DeploymentList{}, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promo-0"}}},
		{"Service", &corev1.ServiceList{}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "promo-0"}}},
	}
	for _, c := range children {
		if err := b.c.Get(context.Background(), client.ObjectKeyFromObject(c.obj), c.obj); err != nil {
			b.t.Fatal(err)
		}
	}
	return children
}

// ----- 2. convergence -----

func (b *bench) convergence() {
	type key struct{ n, conc int } // concurrent reconciles, or the baseline's goroutines
	runs, base := map[key][]time.Duration{}, map[key][]time.Duration{}
	writes, conflicts := map[key][]float64{}, map[key][]float64{} // the operator's, when converged
	for r := range b.sc.repeats {
		for _, n := range b.sc.ns {
			for _, g := range b.sc.goroutines {
				ns := b.namespace(fmt.Sprintf("bench-base-%d-%d-%d", n, g, r))
				base[key{n, g}] = append(base[key{n, g}], b.baseline(ns, n, g))
				b.deleteNamespace(ns)
			}
			for _, conc := range b.sc.concurrencies {
				ns := b.namespace(fmt.Sprintf("bench-op-%d-%d-%d", n, conc, r))
				o := b.startBench(fmt.Sprintf("converge-%d-%d", n, conc), conc, "--namespace="+ns)
				b.waitForLog(o, "caches synced", `Starting workers`)
				start := time.Now()
				b.createPromociones(ns, n, 0)
				b.waitConverged(ns, n)
				runs[key{n, conc}] = append(runs[key{n, conc}], time.Since(start))
				writes[key{n, conc}] = append(writes[key{n, conc}], o.writes()/float64(n))
				conflicts[key{n, conc}] = append(conflicts[key{n, conc}], o.metric("rest_client_requests_total", func(l string) bool {
					return strings.Contains(l, `code="409"`)
				}))
				b.checkChildren(ns, n)
				o.stop(b.t)
				b.deleteNamespace(ns)
			}
		}
	}
	for _, n := range b.sc.ns {
		// The baseline is the plain client at its best concurrency.
		best := slices.MinFunc(b.sc.goroutines, func(g, h int) int { return cmp.Compare(median(base[key{n, g}]), median(base[key{n, h}])) })
		for _, g := range b.sc.goroutines {
			beside := fmt.Sprintf("%.2f× the best", median(base[key{n, g}]).Seconds()/median(base[key{n, best}]).Seconds())
			if g == best {
				beside = "**the baseline**"
			}
			b.row("| Convergence of %d, plain client, %d goroutines | %s | %s; %d writes per Promocion |", n, g, spread(base[key{n, g}]), beside, b.template.writes())
		}
		for _, conc := range b.sc.concurrencies {
			k := key{n, conc}
			op := runs[k]
			ratio := median(op).Seconds() / median(base[key{n, best}]).Seconds()
			b.row("| Convergence of %d, operator, %d concurrent reconciles | %s | %.2f× baseline; %.1f writes per Promocion, %.0f conflicts |",
				n, conc, spread(op), ratio, medianOf(writes[k]), medianOf(conflicts[k]))
			if n == slices.Max(b.sc.ns) && conc == defaultConcurrency {
				b.goal(fmt.Sprintf("Convergence of %d within 1.5× the baseline (%d concurrent reconciles, the default)", n, conc), ratio <= 1.5, fmt.Sprintf("%.2f×", ratio))
			}
		}
	}
}

// baseline makes, with a plain client and g goroutines, the writes the
// operator makes on the way to convergence: each Promocion, its three
// children, the Event telling so, its status. The children, the Event and the
// status are copies of what the operator made for one Promocion (b.template),
// ownerReferences included, so that the API server, its admission and the
// garbage collector have the same work to do.
func (b *bench) baseline(ns string, n, g int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	b.parallel(n, g, func(i int) error {
		p := promocion(ns, i, 0)
		if err := b.c.Create(ctx, p); err != nil {
			return err
		}
		for _, tmpl := range b.template.objects {
			obj := b.template.copyFor(tmpl, p)
			if err := b.c.Create(ctx, obj); err != nil {
				return err
			}
		}
		status := b.template.copyFor(b.template.promo, p).(*unstructured.Unstructured)
		p.Object["status"] = status.Object["status"]
		return b.c.Status().Update(ctx, p)
	})
	return time.Since(start)
}

// template is what the operator made for one Promocion: the baseline's model.
type template struct {
	promo   *unstructured.Unstructured
	objects []client.Object // the ConfigMap, Deployment and Service, and the Event
}

// writes is how many writes the baseline makes for each Promocion: the
// Promocion, a copy of each object, its status.
func (t *template) writes() int { return 1 + len(t.objects) + 1 }

// makeTemplate lets the operator make one Promocion's children and status.
func (b *bench) makeTemplate() {
	ns := b.namespace("bench-template")
	o := b.startBench("template", defaultConcurrency, "--namespace="+ns)
	b.createPromociones(ns, 1, 0)
	b.waitListo(ns, 1)
	o.stop(b.t)
	ctx := context.Background()
	p := promocion(ns, 0, 0)
	var evs eventsv1.EventList
	for _, err := range []error{
		b.c.Get(ctx, client.ObjectKeyFromObject(p), p),
		b.c.List(ctx, &evs, client.InNamespace(ns)),
	} {
		if err != nil {
			b.t.Fatal(err)
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
	if len(b.template.objects) != 4 {
		b.t.Fatalf("the operator made %d objects for the template Promocion, want 3 children and 1 Event", len(b.template.objects))
	}
	b.deleteNamespace(ns)
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
	case *appsv1.Deployment:
		o.Status = appsv1.DeploymentStatus{}
	case *corev1.Service:
		o.Spec.ClusterIP, o.Spec.ClusterIPs = "", nil
	case *eventsv1.Event:
		o.Name, o.GenerateName = "", p.GetName()+"-"
	}
	return out
}

// waitConverged waits until n Promociones in ns have a status written for
// their generation with every child applied (Degraded False). It follows a
// watch rather than polling a list: listing 1000 Promociones every few
// milliseconds would load the API server during the operator's runs and not
// during the baseline's.
func (b *bench) waitConverged(ns string, n int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	converged := map[string]bool{} // the names of those converged
	track := func(p *unstructured.Unstructured, deleted bool) {
		if !deleted && promocionConverged(p) {
			converged[p.GetName()] = true
		} else {
			delete(converged, p.GetName())
		}
	}
	for {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("tienda.example.com/v1")
		list.SetKind("PromocionList")
		if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			b.t.Fatal(err)
		}
		clear(converged)
		for i := range list.Items {
			track(&list.Items[i], false)
		}
		w, err := b.c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			b.t.Fatal(err)
		}
		for {
			if len(converged) == n {
				w.Stop()
				return
			}
			ev, ok := <-w.ResultChan()
			if !ok || ev.Type == watch.Error {
				break // closed or expired: list again
			}
			if p, ok := ev.Object.(*unstructured.Unstructured); ok {
				track(p, ev.Type == watch.Deleted)
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			b.t.Fatalf("%d of %d Promociones converged in %s", len(converged), n, ns)
		}
	}
}

// promocionConverged tells whether p has a status for its generation with
// every child applied (Degraded False).
func promocionConverged(p *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, c := range conds {
		if c := c.(map[string]any); gen == p.GetGeneration() && c["type"] == "Degraded" && c["status"] == "False" {
			return true
		}
	}
	return false
}

// checkChildren checks that ns holds exactly n of each child.
func (b *bench) checkChildren(ns string, n int) {
	for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}} {
		if err := b.c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/managed-by": "operador-promociones"}); err != nil {
			b.t.Fatal(err)
		}
		if got := meta.LenList(l); got != n {
			b.t.Errorf("%s: %d %T, want %d", ns, got, l, n)
		}
	}
}

// ----- 3. steady state and 5. start-up -----

func (b *bench) steadyStateAndStartUp() {
	n := slices.Max(b.sc.ns)
	ns := b.namespace("bench-steady")
	o := b.startBench("steady-first", defaultConcurrency, "--namespace="+ns)
	b.createPromociones(ns, n, 0)
	b.waitConverged(ns, n)
	// Converged for good: Listo, once the Deployment controller has reported.
	// A fresh operator would otherwise rightly write the status the first one
	// had not written yet.
	b.waitListo(ns, n)
	o.stop(b.t)

	var synced, first, resynced []time.Duration
	var writes []float64
	for r := range b.sc.repeats {
		o := b.startBench(fmt.Sprintf("steady-%d", r), defaultConcurrency, "--namespace="+ns)
		firstAt := b.waitMetric(o, "controller_runtime_reconcile_total", 1)
		allAt := b.waitMetric(o, "controller_runtime_reconcile_total", float64(n))
		syncedAt := b.waitForLog(o, "caches synced", `Starting workers`)
		if ts := o.logTime(`Starting workers`); !ts.IsZero() {
			syncedAt = ts
		}
		synced = append(synced, syncedAt.Sub(o.startedAt))
		first = append(first, firstAt.Sub(o.startedAt))
		resynced = append(resynced, allAt.Sub(o.startedAt))
		b.waitIdle(o) // every reconcile of the resync done, so every write it made counted
		w := o.writes()
		writes = append(writes, w)
		if w != 0 {
			b.t.Errorf("a fresh operator sent %v writes resyncing %d converged Promociones, want 0", w, n)
		}
		if r == b.sc.repeats-1 {
			before := o.writes()
			time.Sleep(b.sc.idle) // the measurement itself: writes while nothing happens
			if idle := o.writes() - before; idle != 0 {
				b.t.Errorf("%v writes while idle for %s, want 0", idle, b.sc.idle)
			} else {
				b.row("| Writes while idle for %s with %d Promociones | 0 | |", b.sc.idle, n)
			}
		}
		o.stop(b.t)
	}
	b.row("| Resync of %d converged Promociones by a fresh operator | %s | |", n, spread(resynced))
	b.row("| Writes during that resync (POST, PUT, PATCH, DELETE) | %v | |", writes)
	b.row("| Start-up: process start to caches synced | %s | |", spread(synced))
	b.row("| Start-up: process start to first reconcile | %s | |", spread(first))
	b.goal("Zero writes in the steady state", slices.Max(writes) == 0, fmt.Sprintf("%v", slices.Max(writes)))
}

// ----- 4. memory -----

func (b *bench) memory() {
	n := slices.Max(b.sc.ns)
	type mem struct{ peak, settled float64 }
	unscoped := filepath.Join(b.tmp, "operador-unscoped")
	build := exec.Command("go", "build", "-tags", "unscoped", "-o", unscoped, ".")
	build.Dir = b.root
	if out, err := build.CombinedOutput(); err != nil {
		b.t.Fatalf("building the operator without cache scoping: %v\n%s", err, out)
	}
	measure := func(binary string) mem {
		// Every namespace: an unscoped cache would then hold every ConfigMap.
		o := b.start(launch{who: "memory", binary: binary, args: []string{"--max-concurrent-reconciles=" + strconv.Itoa(defaultConcurrency)}})
		b.waitMetric(o, "controller_runtime_reconcile_total", float64(n))
		time.Sleep(b.sc.settle) // the measurement: memory once the burst has passed
		peak, settled := o.rss(b.t)
		o.stop(b.t)
		return mem{peak, settled}
	}
	without, withoutUnscoped := measure(""), measure(unscoped)

	ns := b.namespace("bench-ajenas")
	page := strings.Repeat("x", 10*1024)
	b.parallel(b.sc.unrelated, 32, func(i int) error {
		return b.c.Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ajena-%d", i), Namespace: ns}, Data: map[string]string{"data": page}})
	})
	with, withUnscoped := measure(""), measure(unscoped)
	b.deleteNamespace(ns)

	b.row("| Memory, %d Promociones (RSS peak / settled) | %.0f / %.0f MiB | cache scoping off: %.0f / %.0f MiB |", n, without.peak, without.settled, withoutUnscoped.peak, withoutUnscoped.settled)
	b.row("| Memory, %d Promociones and %d unrelated 10 KB ConfigMaps | %.0f / %.0f MiB | cache scoping off: %.0f / %.0f MiB |", n, b.sc.unrelated, with.peak, with.settled, withUnscoped.peak, withUnscoped.settled)
	growth := with.settled/without.settled - 1
	b.goal(fmt.Sprintf("Memory with %d unrelated ConfigMaps within 10%% of without", b.sc.unrelated), growth <= 0.10,
		fmt.Sprintf("%+.0f%% (without scoping: %+.0f%%)", 100*growth, 100*(withUnscoped.settled/withoutUnscoped.settled-1)))
}

// ----- helpers -----

// startBench starts an operator with conc concurrent reconciles.
func (b *bench) startBench(who string, conc int, args ...string) *operator {
	return b.start(launch{who: who, args: append([]string{"--max-concurrent-reconciles=" + strconv.Itoa(conc)}, args...)})
}

func (b *bench) goal(what string, met bool, figure string) {
	verdict := "met"
	if !met {
		verdict = "**not met**"
	}
	b.goals = append(b.goals, fmt.Sprintf("| %s | %s | %s |", what, figure, verdict))
}

func (b *bench) report() string {
	var r strings.Builder
	mem := "?"
	if f, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindSubmatch(f); m != nil {
			kb, _ := strconv.Atoi(string(m[1]))
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/1024/1024)
		}
	}
	fmt.Fprintf(&r, "Run of %s (scale %s), %d CPUs, %s memory, %s, took %s.\n",
		b.started.UTC().Format("2006-01-02 15:04 MST"), b.sc.name, runtime.NumCPU(), mem, runtime.Version(), time.Since(b.started).Round(time.Second))
	fmt.Fprintf(&r, "Times are the median of %d runs, with [min, max].\n\n", b.sc.repeats)
	r.WriteString("| measure | figure | beside it |\n| --- | --- | --- |\n")
	for _, row := range b.rows {
		r.WriteString(row + "\n")
	}
	r.WriteString("\n| goal | measured | verdict |\n| --- | --- | --- |\n")
	for _, g := range b.goals {
		r.WriteString(g + "\n")
	}
	return r.String()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianOf(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

// spread is "median [min, max]".
func spread(ds []time.Duration) string {
	return fmt.Sprintf("%s [%s, %s]", ms(median(ds)), ms(slices.Min(ds)), ms(slices.Max(ds)))
}

func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
