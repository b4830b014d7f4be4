package chaos

// The chaos suite: faults injected on purpose into the operator and the
// cluster under it, and after each, a check that the world is exactly what the
// Promociones ask for. `make chaos` runs it at full scale (CHAOS_SCALE=full)
// and writes its report to CHAOS_OUT; `make test` runs a short version.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"operador-promociones/e2e/framework"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type chaosScale struct {
	name               string
	crashScenarios     []change
	everyCrashPoint    bool
	watchDelay         time.Duration // 0: not run
	heldChanges        int
	walkSeeds          int
	walkSteps          int
	network            []networkFault
	blackhole          time.Duration
	crashN, crashKills int
	outageN            int
	apiOutages         []time.Duration
	etcdOutage         time.Duration // 0: not run
	leaderN            int
	fight              time.Duration // 0: not run
	fightN             int
	recreations        int // 0: not run
	namespaceN         int // 0: not run
}

var (
	shortChaos = chaosScale{name: "short", crashScenarios: crashScenarios[:1], walkSeeds: 1, walkSteps: 30, crashN: 30, crashKills: 1, outageN: 10,
		apiOutages: []time.Duration{5 * time.Second}, leaderN: 20}
	fullChaos = chaosScale{name: "full", crashScenarios: crashScenarios, everyCrashPoint: true, watchDelay: 3 * time.Second, heldChanges: 20, walkSeeds: 3, walkSteps: 1000,
		network: []networkFault{{"latency 200ms", faults{latency: 200 * time.Millisecond}}, {"watches cut", faults{cutWatches: 2 * time.Second}},
			{"429 Retry-After", faults{throttle: 0.3}}, {"410 Gone", faults{expire: true}}},
		blackhole: 40 * time.Second, crashN: 300, crashKills: 3, outageN: 50,
		apiOutages: []time.Duration{5 * time.Second, 30 * time.Second}, etcdOutage: 10 * time.Second, leaderN: 60,
		fight: 30 * time.Second, fightN: 20, recreations: 20, namespaceN: 200}
)

// bugsFound are the bugs each scenario found when it was first run, and the
// commits that fixed them: history, written down here so that the report
// carries it; the run itself shows that they stay fixed.
var bugsFound = map[string]string{
	"Frozen leader": "a deposed leader woken up wrote with its stale cache, putting old banners back: the leader fence (4faf58a, moved to the transport in 94a9516); " +
		"building the Lease client changed the operator's shared config (b203ece)",
	"Frozen leader, fence off (test-only build)": "none: it shows the stale writes the fence stops",
	"Namespace deletion":                         "thousands of error lines and Warning events for creates refused in a namespace being deleted (1231f60)",
	"Stale view at start-up":                     "rbac.yaml without delete on the children: the API server refused to let the operator set their ownerReferences, so it could not take back children (3490d07)",
}

// networkFault is a named set of faults for the proxy.
type networkFault struct {
	name string
	f    faults
}

// result is one row of the report.
type result struct {
	scenario, faults string
	cases            int // crash points, steps, changes: what the scenario tried
	checked, wrong   int
	converged        time.Duration // after the last fault
	notes            string
	leftovers        int // ReplicaSets of deleted Deployments that kube-controller-manager left
}

func TestChaos(t *testing.T) {
	sc := shortChaos
	if os.Getenv("CHAOS_SCALE") == "full" {
		sc = fullChaos
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("scale %s, random seed %d", sc.name, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	started := time.Now()
	var results []result
	var details []string
	scenario := func(name string, run func(l *lesson) result) {
		t.Run(name, func(t *testing.T) {
			r := run(newLesson(t))
			if t.Failed() && r.wrong == 0 {
				r.notes += " (the scenario failed: see the test log)"
			}
			results = append(results, r)
			t.Logf("%s: checked %d, lost or wrong %d, converged %s after the last fault; %s", r.scenario, r.checked, r.wrong, framework.Ms(r.converged), r.notes)
		})
	}

	scenario("crash", func(l *lesson) result { return crashMidFlight(l, rng, sc.crashN, sc.crashKills) })
	for _, d := range sc.apiOutages {
		scenario(fmt.Sprintf("apiserver-%s", d), func(l *lesson) result { return outage(l, "kube-apiserver", d, sc.outageN) })
	}
	if sc.etcdOutage > 0 {
		scenario("etcd", func(l *lesson) result { return outage(l, "etcd", sc.etcdOutage, sc.outageN) })
	}
	scenario("frozen-leader", func(l *lesson) result { return frozenLeader(l, sc.leaderN, framework.Env.Operator, true) })
	scenario("frozen-leader-unfenced", func(l *lesson) result { return frozenLeader(l, sc.leaderN, framework.Env.Unfenced, false) })
	if sc.fight > 0 {
		scenario("fights", func(l *lesson) result { return fights(l, rng, sc.fight, sc.fightN) })
	}
	if sc.recreations > 0 {
		scenario("same-name", func(l *lesson) result { return sameName(l, rng, sc.recreations) })
	}
	if sc.namespaceN > 0 {
		scenario("namespace-deletion", func(l *lesson) result { return namespaceDeletion(l, sc.namespaceN) })
	}
	scenario("crash-points", func(l *lesson) result { return crashPoints(l, sc.crashScenarios, sc.everyCrashPoint) })
	scenario("stale-restart", staleRestart)
	if sc.watchDelay > 0 {
		scenario("lagging-watches", func(l *lesson) result { return laggingWatches(l, sc.watchDelay) })
	}
	if sc.heldChanges > 0 {
		scenario("unobserved", func(l *lesson) result { return heldWatches(l, sc.heldChanges) })
	}
	for _, nf := range sc.network {
		scenario("network-"+nf.name, func(l *lesson) result { return network(l, nf.name, nf.f, 10*time.Second) })
	}
	if sc.blackhole > 0 {
		scenario("blackhole", func(l *lesson) result { return blackhole(l, sc.blackhole, 50) })
	}
	scenario("fuzzing", func(l *lesson) result {
		seeds, steps := []uint64{rng.Uint64()}, sc.walkSteps
		for range sc.walkSeeds - 1 {
			seeds = append(seeds, rng.Uint64())
		}
		if s := os.Getenv("CHAOS_SEED"); s != "" { // a replay of one walk
			seed, _ := strconv.ParseUint(s, 10, 64)
			seeds = []uint64{seed}
			steps, _ = strconv.Atoi(cmp.Or(os.Getenv("CHAOS_STEPS"), strconv.Itoa(steps)))
		}
		return fuzz(l, seeds, steps)
	})
	scenario("hostile-input", func(l *lesson) result {
		r, d := hostileInput(l)
		details = d
		return r
	})

	var r strings.Builder
	fmt.Fprintf(&r, "Run of %s (scale %s, random seed %d), took %s.\n\n", started.UTC().Format("2006-01-02 15:04 MST"), sc.name, seed, time.Since(started).Round(time.Second))
	r.WriteString("| scenario | faults injected | cases tried | objects checked | lost or wrong | converged after the last fault | bugs it found, and the fix | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	cases, wrong := 0, 0
	for _, x := range results {
		if x.leftovers > 0 {
			x.notes += fmt.Sprintf(" (kube-controller-manager's garbage collector left %d ReplicaSet(s) of a deleted Deployment: see below)", x.leftovers)
		}
		cases, wrong = cases+max(x.cases, 1), wrong+x.wrong
		fmt.Fprintf(&r, "| %s | %s | %d | %d | %d | %s | %s | %s |\n", x.scenario, x.faults, max(x.cases, 1), x.checked, x.wrong, framework.Ms(x.converged), cmp.Or(bugsFound[x.scenario], "none"), x.notes)
	}
	fmt.Fprintf(&r, "\nIn all: %d scenarios, %d cases tried, %d objects lost or wrong.\n", len(results), cases, wrong)
	r.WriteString("\nHostile input, each through the API server, the operator and the page:\n\n| input | outcome |\n| --- | --- |\n")
	for _, d := range details {
		r.WriteString(d + "\n")
	}
	fmt.Println(r.String())
	if out := os.Getenv("CHAOS_OUT"); out != "" && os.Getenv("CHAOS_SEED") == "" { // a replay is not a run to report
		if err := framework.Splice(out, "chaos", r.String()); err != nil {
			t.Error(err)
		}
	}
}

// ----- the world, and how to check it -----

// scenarioNamespace makes a namespace holding, beside what the scenario adds,
// two objects of the user's that the operator must never touch.
func (l *lesson) scenarioNamespace(name string) (string, func() []string) {
	l.T.Helper()
	ns := l.Namespace(name)
	l.T.Cleanup(func() { _, _ = l.TryKubectl("delete", "namespace", ns, "--wait=false") })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "del-usuario", Namespace: ns}, Data: map[string]string{"index.html": "mío"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ajeno", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	for _, obj := range []client.Object{cm, svc} {
		if err := l.C.Create(context.Background(), obj); err != nil {
			l.T.Fatal(err)
		}
	}
	untouched := func() []string {
		var changed []string
		for _, obj := range []client.Object{cm, svc} {
			now := obj.DeepCopyObject().(client.Object)
			if err := l.C.Get(context.Background(), client.ObjectKeyFromObject(obj), now); err != nil {
				changed = append(changed, fmt.Sprintf("the user's %s: %v", obj.GetName(), err))
			} else if now.GetResourceVersion() != obj.GetResourceVersion() {
				changed = append(changed, fmt.Sprintf("the user's %s was changed", obj.GetName()))
			}
		}
		return changed
	}
	return ns, untouched
}

// problems lists how ns differs from what its Promociones ask for, by the
// oracle (oracle.go: what a fresh operator would make of each Promocion), and
// how the user's objects were touched. It returns how many Promociones it
// checked, and, apart, the ReplicaSets whose Deployment is gone:
// kube-controller-manager's garbage collector, not the operator, removes those.
func (l *lesson) problems(ns string, untouched func() []string) (promociones int, problems, leftovers []string) {
	promociones = strings.Count(l.Kubectl("get", "promociones", "-n", ns, "-o", "name"), "promocion")
	for _, p := range l.Oracle(ns, "") {
		if strings.HasSuffix(p, "outlives its Deployment") {
			leftovers = append(leftovers, p)
		} else {
			problems = append(problems, p)
		}
	}
	return promociones, append(problems, untouched()...), leftovers
}

// converge waits until ns is right, and returns how long that took from since.
// If it never is, the test fails and the result names what stayed wrong.
func (l *lesson) converge(ns string, untouched func() []string, since time.Time, r *result) {
	l.T.Helper()
	start := time.Now()
	operatorsDone := time.Duration(-1) // since when the operator's part has been right
	var problems, leftovers []string
	err := framework.Poll(5*time.Minute, 200*time.Millisecond, func() error {
		var promociones int
		promociones, problems, leftovers = l.problems(ns, untouched)
		r.checked, r.wrong, r.converged = 4*promociones, min(len(problems), promociones), time.Since(since)
		switch {
		case len(problems) > 0:
			operatorsDone = -1
			return errors.New("not right yet")
		case operatorsDone < 0:
			operatorsDone = r.converged
		}
		if len(leftovers) == 0 {
			l.Logf("ok: %s is what its %d Promociones ask for, %s after the last fault", ns, promociones, framework.Ms(r.converged))
			return nil
		}
		if time.Since(start) > time.Minute {
			// The operator's part is right. kube-controller-manager's garbage
			// collector can miss a Deployment's deletion for good when it happens
			// during its watch gap and the operator makes the Deployment again
			// under the same name at once: the old ReplicaSet then stays.
			l.Logf("ok: %s is what its %d Promociones ask for; left by kube-controller-manager: %s", ns, promociones, strings.Join(leftovers, "; "))
			r.leftovers, r.converged = len(leftovers), operatorsDone
			return nil
		}
		return errors.New("leftovers")
	})
	if err != nil {
		if r.wrong == 0 {
			r.wrong = len(problems)
		}
		l.T.Errorf("%s is not right after %s:\n%s", ns, time.Since(since).Round(time.Second), strings.Join(framework.First(append(problems, leftovers...), 20), "\n"))
		return
	}
	l.quiet(ns, r)
}

// quietFor is how long the operator must write nothing once the world is right.
var quietFor = 3 * time.Second

// quiet checks, from the audit log, that the operator writes nothing in ns
// for quietFor once ns is right: a write there would be a fight, or churn.
func (l *lesson) quiet(ns string, r *result) {
	l.T.Helper()
	from := time.Now()
	time.Sleep(quietFor) // the measurement itself: a quiet period
	l.AuditFlushed()
	if ws := l.Audit(from, func(w framework.Request) bool {
		return w.UserAgent == "operador-promociones" && strings.Contains(w.URI, "/namespaces/"+ns+"/")
	}); len(ws) > 0 {
		r.wrong++
		l.T.Errorf("the operator wrote in %s after it was right, in the quiet period:\n%s", ns, framework.First(ws, 10))
	}
}

// ----- the operator's kubelet -----

// kubelet keeps an operator process running, starting it again when it exits,
// as the kubelet restarts a container (here after 1 s rather than with backoff).
type kubelet struct {
	l               *lesson
	who, kubeconfig string
	args            []string
	mu              sync.Mutex
	cur             *framework.Operator
	all             []*framework.Operator
	restarts        int
	stopping        chan struct{}
	stopped         chan struct{}
	exitReasons     []string
}

func (l *lesson) kubelet(who, kubeconfig string, args ...string) *kubelet {
	k := &kubelet{l: l, who: who, kubeconfig: kubeconfig, args: args, stopping: make(chan struct{}), stopped: make(chan struct{})}
	k.start()
	go func() {
		defer close(k.stopped)
		for {
			o := k.current()
			select {
			case <-k.stopping:
				return
			case <-o.Done:
			}
			k.mu.Lock()
			k.restarts++
			k.exitReasons = append(k.exitReasons, exitReason(o))
			k.mu.Unlock()
			select {
			case <-k.stopping:
				return
			case <-time.After(time.Second):
			}
			k.start()
		}
	}()
	l.T.Cleanup(k.stop)
	return k
}

func (k *kubelet) start() {
	o := k.l.Start(framework.Launch{Who: fmt.Sprintf("%s-%d", k.who, len(k.all)+1), Kubeconfig: k.kubeconfig, Args: k.args})
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cur, k.all = o, append(k.all, o)
}

func (k *kubelet) current() *framework.Operator {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur
}

// kill sends SIGKILL to the running operator; the kubelet starts another.
func (k *kubelet) kill() {
	o := k.current()
	_ = o.Cmd.Process.Signal(syscall.SIGKILL)
	<-o.Done
}

// waitRunning waits for an operator started after since to have started its workers.
func (k *kubelet) waitRunning(since time.Time) {
	k.l.T.Helper()
	k.l.Eventually("the operator runs again", func() error {
		o := k.current()
		if o.StartedAt.Before(since) {
			return errors.New("not restarted yet")
		}
		return o.LogHas(`Starting workers`)
	})
}

func (k *kubelet) stop() {
	select {
	case <-k.stopping:
		return
	default:
	}
	close(k.stopping)
	<-k.stopped
	if o := k.current(); !o.Exited() {
		o.Stop(k.l.T)
	}
}

// errorLines counts the error lines in every log of this kubelet's operators.
func (k *kubelet) errorLines() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, o := range k.all {
		n += o.LogLines(`\tERROR\t`)
	}
	return n
}

func (k *kubelet) summary() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.restarts == 0 {
		return "the operator rode it out (no restart)"
	}
	count := map[string]int{}
	var reasons []string
	for _, r := range k.exitReasons {
		if count[r]++; count[r] == 1 {
			reasons = append(reasons, r)
		}
	}
	for i, r := range reasons {
		reasons[i] = fmt.Sprintf("%d× %s", count[r], r)
	}
	return fmt.Sprintf("the operator exited %d times (%s) and was started again", k.restarts, strings.Join(reasons, ", "))
}

// exitReason says in a few words why an operator process exited.
func exitReason(o *framework.Operator) string {
	line := o.FirstLine(`leader election lost|Operator stopped`)
	switch {
	case strings.Contains(line, "leader election lost"):
		return "leader election lost"
	case strings.Contains(line, "connection refused"):
		return "API server unreachable at start-up"
	case strings.Contains(line, "Operator stopped"):
		_, after, _ := strings.Cut(line, "Operator stopped")
		return "Operator stopped" + after
	}
	return fmt.Sprint(o.Err)
}

func crashMidFlight(l *lesson, rng *rand.Rand, n, kills int) result {
	r := result{scenario: "Crash mid-flight", faults: fmt.Sprintf("%d SIGKILLs while %d Promociones converge", kills, n)}
	ns, untouched := l.scenarioNamespace("caos-crash")
	k := l.kubelet("crash", l.Kubeconfig, "--namespace="+ns)
	k.waitRunning(time.Time{})
	l.CreatePromociones(ns, n, 1)
	var at []string
	var last time.Time
	for i := range kills {
		time.Sleep(time.Duration(300+rng.IntN(2000)) * time.Millisecond) // the fault's timing, at random: no assertion waits on it
		at = append(at, fmt.Sprintf("%d%%", 100*l.Listo(ns)/n))
		k.kill()
		last = time.Now()
		l.Logf("SIGKILL %d of %d, with %s Listo", i+1, kills, at[len(at)-1])
		if i < kills-1 {
			k.waitRunning(last)
		}
	}
	l.converge(ns, untouched, last, &r)
	r.notes = fmt.Sprintf("killed with %s of the Promociones Listo; %d restarts", strings.Join(at, ", "), k.restarts)
	k.stop()
	return r
}

// ----- 2 and 3. outages -----

// outage stops component (kube-apiserver or etcd) for d while an operator
// with leader election runs, then changes things right after it is back.
func outage(l *lesson, component string, d time.Duration, n int) result {
	r := result{scenario: fmt.Sprintf("%s outage", component), faults: fmt.Sprintf("%s stopped (SIGKILL) for %s, then started again", component, d)}
	ns, untouched := l.scenarioNamespace("caos-" + strings.ToLower(strings.ReplaceAll(component+"-"+d.String(), "kube-", "")))
	// deploy.yaml's leader election timings: a Lease of 30 s, renewed within 20 s.
	k := l.kubelet(component, l.Kubeconfig, "--namespace="+ns, "--leader-elect", "--leader-election-namespace="+ns)
	k.waitRunning(time.Time{})
	l.CreatePromociones(ns, n, 1)
	l.converge(ns, untouched, time.Now(), &result{})

	stopAt := time.Now()
	if out, err := framework.ClusterSh("stop", component).CombinedOutput(); err != nil {
		l.T.Fatalf("stopping %s: %v\n%s", component, err, out)
	}
	time.Sleep(d - time.Since(stopAt)) // the outage's length is the fault itself
	if out, err := framework.ClusterSh("start", component).CombinedOutput(); err != nil {
		l.T.Fatalf("starting %s: %v\n%s", component, err, out)
	}
	l.Eventually("the API server answers again", func() error {
		_, err := l.TryKubectl("get", "--raw", "/readyz")
		return err
	})
	back := time.Now()
	r.faults += fmt.Sprintf(" (%s until the API server answered again)", back.Sub(stopAt).Round(100*time.Millisecond))
	l.Logf("%s was down for %s", component, back.Sub(stopAt).Round(time.Millisecond))

	// Right after it is back: a child deleted, a banner changed, a Promocion added.
	ctx := context.Background()
	if err := l.C.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "promo-0", Namespace: ns}}); err != nil {
		l.T.Fatal(err)
	}
	l.setBanner(ns, "promo-1", "cambiada tras el corte")
	if err := l.C.Create(ctx, framework.Promocion(ns, n, 1)); err != nil {
		l.T.Fatal(err)
	}
	l.converge(ns, untouched, back, &r)
	remade := "never"
	for _, w := range l.OperatorWrites(back) {
		if w.Verb == "create" && w.Code == 201 && w.Object == "deployments/"+ns+"/promo-0" {
			remade = w.At.Sub(back).Round(100 * time.Millisecond).String()
			break
		}
	}
	r.notes = fmt.Sprintf("%s; right after, a Deployment deleted (the operator made it again %s after the API server answered), a banner changed and a Promocion created", k.summary(), remade)
	k.stop()
	return r
}

func (l *lesson) setBanner(ns, name, banner string) {
	l.T.Helper()
	p := &unstructured.Unstructured{}
	p.SetAPIVersion("tienda.example.com/v1")
	p.SetKind("Promocion")
	p.SetNamespace(ns)
	p.SetName(name)
	patch := fmt.Sprintf(`{"spec":{"banner":%q}}`, banner)
	if err := l.C.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		l.T.Fatal(err)
	}
}

// ----- 4. frozen leader -----

// frozenLeader freezes the leader with SIGSTOP in the middle of a burst, with
// reconciles in flight and a full queue, past its Lease; the standby takes
// over while every Promocion changes; then the old leader wakes up. From the
// API server's audit log: no write of the old leader after the handover, when
// it runs binary with the fence; some, when it runs the test-only build
// without it (fenced false), which proves the fence necessary and effective.
// Both replicas run as ServiceAccounts, so API Priority and Fairness applies.
func frozenLeader(l *lesson, n int, binary string, fenced bool) result {
	const lease = 6 * time.Second
	r := result{scenario: "Frozen leader", faults: fmt.Sprintf("SIGSTOP of the leader mid-burst of %d Promociones, past its Lease (%s); every banner changed meanwhile; SIGCONT", n, lease)}
	name := "caos-lider"
	if !fenced {
		r.scenario, name = "Frozen leader, fence off (test-only build)", "caos-lider-sin-valla"
	}
	ns, untouched := l.scenarioNamespace(name)
	for _, who := range []string{"replica-a", "replica-b"} {
		l.Identity(who)
	}
	args := []string{"--namespace=" + ns, "--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	acquired := `(?i)successfully acquired lease.*default/operador-promociones`
	a := l.Start(framework.Launch{Who: "replica-a", Binary: binary, Kubeconfig: l.ServiceAccountKubeconfig("replica-a"), Args: args})
	l.WaitForLog(a, "replica a leads", acquired)
	b := l.Start(framework.Launch{Who: "replica-b", Binary: binary, Kubeconfig: l.ServiceAccountKubeconfig("replica-b"), Args: args})
	l.WaitForLog(b, "replica b waits", `(?i)attempting to acquire leader lease.*default/operador-promociones`)

	l.CreatePromociones(ns, n, 1)
	l.WaitFor("a third of the burst Listo", framework.WaitTimeout, 10*time.Millisecond, func() error {
		if got := l.Listo(ns); got < n/3 {
			return fmt.Errorf("%d Listo", got)
		}
		return nil
	})
	inFlight := a.Metric("controller_runtime_active_workers", nil) + a.Metric("workqueue_depth", func(s string) bool { return strings.Contains(s, `name="promocion"`) })
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		l.T.Fatal(err)
	}
	frozenAt := time.Now()
	l.Logf("replica a frozen with %d of %d Listo", l.Listo(ns), n)
	for i := range n { // changes the frozen leader's queue and watches will hold when it wakes up
		l.setBanner(ns, fmt.Sprintf("promo-%d", i), fmt.Sprintf("cambio %d con el líder congelado", i))
	}
	l.WaitForLog(b, "replica b takes over", acquired)
	handover := l.LeaseAcquired()
	l.Logf("handover %s after the freeze", handover.Sub(frozenAt).Round(time.Millisecond))
	l.converge(ns, untouched, time.Now(), &result{})

	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		l.T.Fatal(err)
	}
	resumedAt := time.Now()
	select {
	case <-a.Done:
	case <-time.After(time.Minute):
		l.T.Errorf("the old leader still runs a minute after waking up")
	}
	exited := time.Since(resumedAt)
	l.converge(ns, untouched, resumedAt, &r)
	by := func(replica string, after bool) []framework.Request {
		return l.Audit(time.Time{}, func(w framework.Request) bool {
			return w.User == "system:serviceaccount:default:replica-"+replica && w.At.After(handover) == after && !strings.Contains(w.URI, "/leases/")
		})
	}
	after, before, bAfter := by("a", true), by("a", false), by("b", true)
	switch {
	case len(before) == 0 || len(bAfter) == 0:
		l.T.Errorf("the audit log shows %d writes by a before the handover and %d by b after: it does not see the replicas", len(before), len(bAfter))
	case fenced && len(after) > 0:
		l.T.Errorf("the old leader wrote after the handover:\n%s", framework.First(after, 20))
		r.wrong += len(after)
	case !fenced && len(after) == 0:
		l.T.Errorf("without the fence, the old leader wrote nothing after the handover: this scenario does not show what the fence prevents")
	}
	r.cases = 1
	r.notes = fmt.Sprintf("frozen with %.0f reconciles in flight or queued; handover %s after the freeze; the old leader exited %s after SIGCONT (%s); its writes after the handover, from the audit log: %d (before: %d; the new leader's after: %d)",
		inFlight, handover.Sub(frozenAt).Round(100*time.Millisecond), exited.Round(100*time.Millisecond), exitReason(a), len(after), len(before), len(bAfter))
	b.Stop(l.T)
	return r
}

func fights(l *lesson, rng *rand.Rand, d time.Duration, n int) result {
	r := result{scenario: "Fights", faults: fmt.Sprintf("for %s: Deployments scaled, pages edited, ownerReferences removed", d)}
	ns, untouched := l.scenarioNamespace("caos-peleas")
	k := l.kubelet("fights", l.Kubeconfig, "--namespace="+ns)
	k.waitRunning(time.Time{})
	l.CreatePromociones(ns, n, 1)
	l.converge(ns, untouched, time.Now(), &result{})

	ctx := context.Background()
	edits := 0
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		name := fmt.Sprintf("promo-%d", rng.IntN(n))
		var obj client.Object
		var patch string
		switch rng.IntN(3) {
		case 0:
			obj, patch = &appsv1.Deployment{}, fmt.Sprintf(`{"spec":{"replicas":%d}}`, rng.IntN(5))
			obj.SetName(name)
		case 1:
			obj, patch = &corev1.ConfigMap{}, `{"data":{"index.html":"<h1>pirata</h1>"}}`
			obj.SetName(name + "-html")
		default:
			// Any child's controller only: with the labels gone too, the child would
			// no longer be the operator's, and left alone (TestLeavesOthersObjectsAlone).
			children := framework.Children()
			obj, patch = children[rng.IntN(len(children))].Object(ns, name), `{"metadata":{"ownerReferences":null}}`
		}
		obj.SetNamespace(ns)
		if err := l.C.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
			l.T.Fatal(err)
		}
		edits++
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // the pace of the fight
	}
	stopped := time.Now()
	l.converge(ns, untouched, stopped, &r)
	errs := k.errorLines()
	r.notes = fmt.Sprintf("%d edits; %d error lines in the operator's log", edits, errs)
	if errs > 0 {
		l.T.Errorf("the operator logged %d error lines while fought", errs)
	}
	k.stop()
	return r
}

// ----- 6. same name, new object -----

func sameName(l *lesson, rng *rand.Rand, times int) result {
	r := result{scenario: "Same name, new object", faults: fmt.Sprintf("the same Promocion deleted and created again %d times in quick succession", times)}
	ns, untouched := l.scenarioNamespace("caos-mismo-nombre")
	k := l.kubelet("same-name", l.Kubeconfig, "--namespace="+ns)
	k.waitRunning(time.Time{})
	ctx := context.Background()
	var last time.Time
	var uids []types.UID
	for i := range times {
		p := framework.Promocion(ns, 0, 1)
		if err := unstructured.SetNestedField(p.Object, fmt.Sprintf("versión %d", i), "spec", "banner"); err != nil {
			l.T.Fatal(err)
		}
		if err := l.C.Create(ctx, p); err != nil {
			l.T.Fatal(err)
		}
		uids = append(uids, p.GetUID())
		last = time.Now()
		if i == times-1 {
			break
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the pace of the recreations
		if err := l.C.Delete(ctx, p); err != nil {
			l.T.Fatal(err)
		}
	}
	l.converge(ns, untouched, last, &r)
	r.notes = fmt.Sprintf("%d UIDs; the children are controlled by the last one (checked)", len(slices.Compact(uids)))
	k.stop()
	return r
}

// ----- 7. namespace deletion -----

func namespaceDeletion(l *lesson, n int) result {
	r := result{scenario: "Namespace deletion", faults: fmt.Sprintf("a namespace holding %d Promociones deleted", n)}
	ns, untouched := l.scenarioNamespace("caos-borrado")
	k := l.kubelet("namespace", l.Kubeconfig) // every namespace, as deploy.yaml runs it
	k.waitRunning(time.Time{})
	l.CreatePromociones(ns, n, 1)
	l.converge(ns, untouched, time.Now(), &result{})
	errsBefore := k.errorLines()

	deleted := time.Now()
	l.Kubectl("delete", "namespace", ns, "--timeout=5m")
	r.converged, r.checked = time.Since(deleted), 4*n
	l.WaitIdle(k.current()) // it has seen the deletion through
	l.AuditFlushed()
	errs := k.errorLines() - errsBefore
	creates, refused := 0, 0
	for _, w := range l.OperatorWrites(deleted) {
		if strings.Contains(w.URI, "/namespaces/"+ns+"/") && w.Verb == "create" {
			if w.Code < 300 {
				creates++
			} else {
				refused++
			}
		}
	}
	if creates > 0 {
		l.T.Errorf("the operator created %d objects in the namespace being deleted", creates)
		r.wrong = creates
	}
	if errs > 0 {
		l.T.Errorf("the operator logged %d error lines while the namespace was deleted", errs)
	}
	r.notes = fmt.Sprintf("the namespace was gone %s after the delete; objects the operator created there meanwhile: %d (creates refused: %d); error lines: %d",
		framework.Ms(r.converged), creates, refused, errs)
	k.stop()
	return r
}

func hostileInput(l *lesson) (result, []string) {
	r := result{scenario: "Hostile input", faults: "banners with HTML, JavaScript, quotes, control characters, right-to-left text and emoji; the longest banner; the most replicas"}
	ns, untouched := l.scenarioNamespace("caos-hostil")
	k := l.kubelet("hostile", l.Kubeconfig, "--namespace="+ns)
	k.waitRunning(time.Time{})
	cases := []struct {
		what     string
		banner   string
		replicas int
	}{
		{"a script", `<script>alert("xss")</script><b>Rebajas</b>`, 1},
		{"an attribute breakout", `" onmouseover="alert(1)" x="`, 1},
		{"an event handler", `<img src=x onerror=alert(1)>`, 1},
		{"quotes and ampersands", `Tom's "gran" oferta & más &amp; &lt;`, 1},
		{"a newline", "Rebajas\nde verano", 1},
		{"a bell", "Rebajas\a", 1},
		{"a terminal escape", "\x1b[31mRojo\x1b[0m", 1},
		{"a NUL", "Rebajas\x00", 1},
		{"right-to-left text", "تخفيضات الصيف ٥٠٪ — מבצע", 1},
		{"a bidi override", "Rebajas \u202Eanu\u202C", 1},
		{"emoji", "🔥 Rebajas 🔥 👩‍👩‍👧", 1},
		{"blank", " \u00a0 ", 1},
		{"the longest (2048 characters)", strings.Repeat("ñ", 2048), 1},
		{"one character too long", strings.Repeat("ñ", 2049), 1},
		{"the most replicas (100)", "Cien réplicas", 100},
		{"one replica too many", "Ciento una", 101},
		{"negative replicas", "Menos una", -1},
	}
	ctx := context.Background()
	var details []string
	accepted := 0
	for i, c := range cases {
		p := framework.Promocion(ns, i, c.replicas)
		if err := unstructured.SetNestedField(p.Object, c.banner, "spec", "banner"); err != nil {
			l.T.Fatal(err)
		}
		shown := c.banner
		if r := []rune(shown); len(r) > 20 {
			shown = string(r[:20]) + "…"
		}
		err := l.C.Create(ctx, p)
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			msg := err.Error()
			if !strings.Contains(msg, "spec.banner") && !strings.Contains(msg, "spec.replicas") {
				l.T.Errorf("%s: the message does not name the field: %s", c.what, msg)
			}
			details = append(details, fmt.Sprintf("| %s `%q` | rejected: %s |", c.what, shown, tableCell(msg)))
		case err != nil:
			l.T.Errorf("%s: %v", c.what, err)
		default:
			accepted++
			details = append(details, fmt.Sprintf("| %s `%q` | accepted; on the page HTML-escaped, verbatim (checked below) |", c.what, shown))
		}
	}
	l.converge(ns, untouched, time.Now(), &r)
	// Verbatim and escaped: the page holds the escaped banner, and no raw
	// markup from it.
	for i, c := range cases {
		var cm corev1.ConfigMap
		if err := l.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("promo-%d-html", i)}, &cm); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			l.T.Fatal(err)
		}
		page := cm.Data["index.html"]
		if !strings.Contains(page, html.EscapeString(c.banner)) || (c.banner != html.EscapeString(c.banner) && strings.Contains(page, c.banner)) {
			l.T.Errorf("%s: the page does not show the banner verbatim and escaped:\n%s", c.what, page)
			r.wrong++
		}
	}
	r.notes = fmt.Sprintf("%d of %d inputs accepted and shown escaped, %d rejected by the API server with a message naming the field", accepted, len(cases), len(cases)-accepted)
	k.stop()
	return r, details
}

func tableCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
