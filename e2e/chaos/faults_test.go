package chaos

// Faults of the kinds where research found operator bugs (Sieve, OSDI '22;
// Acto, SOSP '23): a crash between two writes of one reconcile, a stale view
// of the world, changes the operator never observes one by one, and a
// network that delays, cuts, throttles or swallows. Each run ends with the
// oracle and a quiet period (chaos_test.go's converge).

import (
	"context"
	"fmt"
	"maps"
	"operador-promociones/e2e/framework"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// change is a step of a scenario: something the user does to the Promocion
// promo-0 of ns, or to its children.
type change struct {
	what string
	do   func(l *lesson, ns string)
	// noWrite: the operator must write nothing for it (a delete: the garbage
	// collector removes the children), so there is no crash point to try.
	noWrite bool
}

// crashScenarios are the changes whose every write is a crash point (and a
// delete, whose lack of writes is checked).
var crashScenarios = []change{
	{what: "create", do: func(l *lesson, ns string) { l.CreatePromociones(ns, 1, 3) }},
	{what: "banner change", do: func(l *lesson, ns string) { l.setBanner(ns, "promo-0", "Nuevo cartel") }},
	{what: "replicas 3, 0, 5, unset", do: func(l *lesson, ns string) {
		for _, r := range []string{"0", "5", "null"} {
			l.Kubectl("patch", "promocion", "promo-0", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":`+r+`}}`)
		}
	}},
	{what: "a child deleted", do: func(l *lesson, ns string) { l.Kubectl("delete", "deployment", "promo-0", "-n", ns) }},
	// Out of the operator's cache, and still controlled by its Promocion. (A
	// child stripped of its controller too would be no longer the operator's:
	// it would be left alone, TestLeavesOthersObjectsAlone.)
	{what: "a child relabelled", do: func(l *lesson, ns string) {
		l.Kubectl("patch", "configmap", "promo-0-html", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":null}}`)
	}},
	{what: "same-name recreate", do: func(l *lesson, ns string) {
		l.Kubectl("delete", "promocion", "promo-0", "-n", ns)
		l.CreatePromociones(ns, 1, 3)
	}},
	{what: "delete", do: func(l *lesson, ns string) { l.Kubectl("delete", "promocion", "promo-0", "-n", ns) }, noWrite: true},
}

// crashPoints runs each scenario once to count the operator's mutating
// requests in it, then once for each chosen one of them and each side of it:
// the operator is SIGKILLed right before the k-th is forwarded, or right
// after the API server answered it and before the answer reached the
// operator; a new operator is started a second later, and the world must end
// right. choice says which writes: every one, or the first of each kind (verb
// and resource) not tried yet in an earlier scenario.
func crashPoints(l *lesson, scenarios []change, choice crashPointChoice) result {
	r := result{scenario: "Crash points", faults: "SIGKILL right before, or right after, the operator's writes in: "}
	var names []string
	for _, sc := range scenarios {
		names = append(names, sc.what)
	}
	r.faults += strings.Join(names, "; ")
	l.Identity("caos-operador")
	p := l.startProxy("caos-operador")
	kubeconfig := p.kubeconfig(l)
	run, unreached := 0, 0
	tried := map[string]bool{} // the kinds of write crashed at
	for _, sc := range scenarios {
		count := func(k int, before bool) []string { // one run; returns the kinds of the writes the scenario made
			run++
			ns, untouched := l.scenarioNamespace(fmt.Sprintf("caos-punto-%d", run))
			p.set(faults{})
			sup := l.kubelet(fmt.Sprintf("punto-%d", run), kubeconfig, "--namespace="+ns)
			sup.waitRunning(time.Time{})
			if sc.what != "create" {
				l.CreatePromociones(ns, 1, 3)
				l.setUp(ns, untouched)
			}
			p.resetWrites()
			crashed := make(chan struct{})
			p.set(faults{crash: func(n int, side bool) bool {
				if n != k || side != before {
					return false
				}
				sup.kill()
				close(crashed)
				return true
			}})
			start := time.Now()
			sc.do(l, ns)
			var res result
			// The counting run has the full quiet period; each crash run the
			// short one, or the crash points alone would take over an hour.
			was := l.short
			l.short = was || k > 0
			l.converge(ns, untouched, start, &res)
			l.short = was
			p.set(faults{})
			if k > 0 {
				select {
				case <-crashed:
					r.cases++
				default:
					// The same scenario does not always take as many writes: a
					// Deployment's status can come in one step or two, so one
					// status write more or less. The world was right all the same.
					unreached++
				}
			}
			r.checked += res.checked
			r.wrong += res.wrong
			r.converged = max(r.converged, res.converged)
			sup.stop()
			l.Kubectl("delete", "namespace", ns, "--wait=false")
			return p.writeKinds()
		}
		writes := count(0, false)
		switch {
		case sc.noWrite && len(writes) > 0:
			l.T.Errorf("%s: the operator wrote %s, where it must write nothing", sc.what, strings.Join(writes, ", "))
		case !sc.noWrite && len(writes) == 0:
			l.T.Errorf("%s: the counting run saw no write of the operator: no crash point to try", sc.what)
		}
		var ks []int
		for i, kind := range writes {
			if choice == everyWrite || !tried[kind] {
				ks = append(ks, i+1)
				tried[kind] = true
			}
		}
		for _, k := range ks {
			for _, before := range []bool{true, false} {
				count(k, before)
			}
		}
		l.Logf("%s: %d writes (%s); crashed before and after writes %v", sc.what, len(writes), strings.Join(writes, ", "), ks)
	}
	if r.cases == 0 {
		l.T.Errorf("no crash point was reached: the scenario crashed nothing")
	}
	r.notes = fmt.Sprintf("%d crash points tried (%s), over %d kinds of write (%s), each ended right", r.cases, p.mustHaveInjected(l.T, faultCrash),
		len(tried), strings.Join(slices.Sorted(maps.Keys(tried)), ", "))
	if unreached > 0 {
		r.notes += fmt.Sprintf("; %d more were not reached, their run taking fewer writes than the counting run (and ended right too)", unreached)
	}
	return r
}

// ----- stale views and unobserved states -----

// staleRestart starts an operator whose first view of ns is as it was before
// three changes that the oracle judges by the current state: a Promocion
// deleted and made again under its name, a banner changed twice, and a child
// taken by another owner. The proxy refuses its informers' watch-lists and
// serves their fallback lists at the old resourceVersion; the watches then
// catch up from there. No write made on the stale view may survive.
func staleRestart(l *lesson) result {
	r := result{scenario: "Stale view at start-up", faults: "an operator started on a view from before a same-name recreate, two banner changes and a child taken by another owner, then catching up, its watches' events 2 s late"}
	ns, untouched := l.scenarioNamespace("caos-antiguo")
	l.Identity("caos-operador")
	p := l.startProxy("caos-operador")
	kubeconfig := p.kubeconfig(l)
	before := l.Start(framework.Launch{Who: "antes", Kubeconfig: kubeconfig, Args: []string{"--namespace=" + ns}})
	l.CreatePromociones(ns, 3, 1)
	l.setUp(ns, untouched)
	before.Stop(l.T)
	// promo-1's ConfigMap is gone in the view from the past, and there now:
	// deleted before that view, and made again after it, as it was. The
	// stale view must lead the operator to a write the API server refuses
	// (a create of what exists), which it then repairs from a fresh read.
	ctx := context.Background()
	var page corev1.ConfigMap
	if err := l.C.Get(ctx, client.ObjectKey{Namespace: ns, Name: "promo-1-html"}, &page); err != nil {
		l.T.Fatal(err)
	}
	if err := l.C.Delete(ctx, &page); err != nil {
		l.T.Fatal(err)
	}
	l.Eventually("promo-1's ConfigMap gone", func() error {
		if err := l.C.Get(ctx, client.ObjectKeyFromObject(&page), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})

	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("v1")
	list.SetKind("ConfigMapList")
	if err := l.C.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		l.T.Fatal(err)
	}
	old := list.GetResourceVersion() // the whole cluster's, as of now
	page.ResourceVersion, page.UID, page.CreationTimestamp = "", "", metav1.Time{}
	if err := l.C.Create(ctx, &page); err != nil {
		l.T.Fatalf("making promo-1's ConfigMap again: %v", err)
	}
	l.Kubectl("delete", "promocion", "promo-0", "-n", ns)
	if err := l.C.Create(ctx, framework.Promocion(ns, 0, 2)); err != nil {
		l.T.Fatalf("making promo-0 again: %v", err)
	}
	l.setBanner(ns, "promo-1", "primer cambio")
	l.setBanner(ns, "promo-1", "segundo cambio")
	// promo-2's Service taken by someone else: the operator must leave it alone.
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "otro-dueno", Namespace: ns}}
	if err := l.C.Create(context.Background(), owner); err != nil {
		l.T.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"otro-dueno","uid":%q,"controller":true}]}}`, owner.UID)
	l.Kubectl("patch", "service", "promo-2", "-n", ns, "--type=merge", "-p", patch)
	l.Kubectl("delete", "promocion", "promo-2", "-n", ns, "--wait=true")

	// Its watches' events 2 s late: the operator acts on its stale lists
	// before the watches bring the changes, as a restart on a slow API
	// server would (without it, the watches caught up before the first
	// reconcile, and the fault could not matter: the full run of fb59841).
	p.set(faults{staleFrom: old, watchDelay: 2 * time.Second})
	start := time.Now()
	o := l.Start(framework.Launch{Who: "viejo", Kubeconfig: kubeconfig, Args: []string{"--namespace=" + ns}})
	l.converge(ns, untouched, start, &r)
	o.Stop(l.T)
	writes := l.Audit(start, func(w framework.Request) bool {
		return w.UserAgent == "operador-promociones" && strings.Contains(w.URI, "/namespaces/"+ns+"/")
	})
	refused := 0
	for _, w := range writes {
		if w.Code >= 400 {
			refused++
		}
	}
	if refused == 0 {
		l.T.Errorf("the operator's stale view led to no write that the API server refused (%d writes): the fault did not matter", len(writes))
	}
	r.cases = 1
	r.notes = fmt.Sprintf("%s, at resourceVersion %s; on the way it wrote %d times, %d refused by the API server (one at least asserted: the create of a ConfigMap that exists, which its stale view lacked), and the end is right",
		p.mustHaveInjected(l.T, faultStale), old, len(writes), refused)
	return r
}

// behindProxy makes a scenario namespace with n Promociones of replicas each,
// and an operator for it that reaches the API server through a fault proxy as
// the ServiceAccount caos-operador; it returns once the world is right.
func (l *lesson) behindProxy(name, who string, n, replicas int, args ...string) (ns string, untouched func() []string, p *proxy, o *framework.Operator) {
	l.T.Helper()
	ns, untouched = l.scenarioNamespace(name)
	l.Identity("caos-operador")
	p = l.startProxy("caos-operador")
	o = l.Start(framework.Launch{Who: who, Kubeconfig: p.kubeconfig(l), Args: append([]string{"--namespace=" + ns}, args...)})
	l.CreatePromociones(ns, n, replicas)
	l.setUp(ns, untouched)
	return ns, untouched, p, o
}

// laggingWatches delivers every watch event to the operator delay late, while
// its reads that bypass the cache (the one after a create finds the name
// taken) go through at once: for seconds it acts on a view that is behind,
// while a banner changes twice, a child is deleted, a Promocion is deleted and
// made again under its name, and another is scaled to 0.
func laggingWatches(l *lesson, delay time.Duration) result {
	r := result{scenario: "Stale view: lagging watches", faults: fmt.Sprintf("every watch event delivered %s late, reads outside the cache at once, while a banner changes twice, a child is deleted, a Promocion is made again under its name and another scaled to 0", delay)}
	ns, untouched, p, o := l.behindProxy("caos-retraso", "retrasado", 4, 2)
	p.set(faults{watchDelay: delay})
	// Each change lands while the operator still reconciles the one before
	// on its late view.
	l.setBanner(ns, "promo-0", "primer cambio")
	l.setBanner(ns, "promo-0", "segundo cambio")
	l.Kubectl("delete", "deployment", "promo-1", "-n", ns)
	l.Kubectl("delete", "promocion", "promo-2", "-n", ns)
	if err := l.C.Create(context.Background(), framework.Promocion(ns, 2, 1)); err != nil {
		l.T.Fatalf("making promo-2 again: %v", err)
	}
	l.Kubectl("patch", "promocion", "promo-3", "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":0}}`)
	last := time.Now()
	l.converge(ns, untouched, last, &r)
	if r.converged < delay { // the operator can only learn of the last change from a late event
		l.T.Errorf("right %s after the last change, sooner than the lag of %s: the watches did not lag", r.converged, delay)
	}
	p.set(faults{})
	if o.Exited() {
		l.T.Errorf("the operator exited (%v): it should ride it out", o.Err)
	}
	o.Stop(l.T)
	r.cases = 5
	r.notes = fmt.Sprintf("5 changes made while %s; the end is right", p.mustHaveInjected(l.T, faultLag))
	return r
}

// laggingOwners delivers the Promociones' watch events to the operator delay
// late and their children's at once, while half of the Promociones are
// deleted: the garbage collector deletes their children, and the operator
// hears of that before it hears that their Promociones went. Whatever its
// cache says, it must make no child for a Promocion the API server has
// deleted: the child would be made for nobody, with a Created Event.
func laggingOwners(l *lesson, n int, delay time.Duration) result {
	r := result{scenario: "Stale view: the Promociones' watch lags", faults: fmt.Sprintf("the Promociones' watch events delivered %s late, their children's at once, while %d of %d Promociones are deleted", delay, n/2, n)}
	ns, untouched, p, o := l.behindProxy("caos-duenos", "duenos", n+1, 1)
	// The garbage collector follows a new CRD's objects only from its next
	// look at the API's resources (every 30 s): a Promocion deleted before
	// it does keeps its children that long, past the lag.
	probe := fmt.Sprintf("promo-%d", n)
	l.Kubectl("delete", "promocion", probe, "-n", ns)
	l.gone("the garbage collector deletes the children of a deleted Promocion", client.ObjectKey{Namespace: ns, Name: probe + "-html"}, &corev1.ConfigMap{})
	p.set(faults{watchDelay: delay, lagOnly: "promociones"})
	deleted := time.Now()
	gone := map[string]bool{}
	for i := range n / 2 {
		name := fmt.Sprintf("promo-%d", i)
		l.Kubectl("delete", "promocion", name, "-n", ns, "--wait=false")
		gone[name], gone[name+"-html"] = true, true
	}
	l.converge(ns, untouched, deleted, &r)
	// The operator hears of the last deletion delay after it: then, once
	// idle, it has done all it will for the Promociones it still held.
	time.Sleep(time.Until(deleted.Add(delay + time.Second)))
	l.WaitIdle(o)
	l.AuditFlushed()
	made := 0
	for _, w := range l.OperatorWrites(deleted) {
		resource, rest, _ := strings.Cut(w.Object, "/")
		if w.Verb == "create" && w.Code < 300 && strings.HasPrefix(rest, ns+"/") && gone[strings.TrimPrefix(rest, ns+"/")] &&
			(resource == "configmaps" || resource == "deployments" || resource == "services") {
			made++
		}
	}
	if made > 0 {
		l.T.Errorf("the operator made %d children for Promociones already deleted: its cache still held them", made)
		r.wrong = made
	}
	read := p.goneReads.Load()
	if made == 0 && read == 0 { // the fault did not matter: no repair met a Promocion its cache held after its deletion
		l.T.Errorf("the operator never acted on a deleted Promocion that its cache still held: the scenario tested nothing")
	}
	p.set(faults{})
	o.Stop(l.T)
	r.cases = n / 2
	r.notes = fmt.Sprintf("%d Promociones deleted while %s; the operator read a deleted Promocion past its cache %d times, and made %d children for them", n/2, p.mustHaveInjected(l.T, faultLag), read, made)
	return r
}

// laggingOwnStatus runs an operator on two namespaces, which turns
// controller-runtime's read-your-writes off, with the Promociones' watch
// delivered lag late, and deletes each Promocion's pod, whose replacement is
// Ready ready after it runs (ready < lag). The operator writes Desplegando;
// the pod is Ready before its cache shows that write; the status it then
// computes, Listo, equals the cached one, older than its own write. Taking
// the cache's word would leave Desplegando in the API server for good: the
// write, coming back, is the operator's own and queues nothing
// (status_writes.go).
func laggingOwnStatus(l *lesson, n int, lag, ready time.Duration) result {
	r := result{scenario: "Stale view: its own status writes late", faults: fmt.Sprintf("an operator of two namespaces (no read-your-writes), the Promociones' watch events delivered %s late, while each of %d Promociones loses its pod, whose replacement is Ready %s after it runs", lag, n, ready)}
	other, untouchedOther := l.scenarioNamespace("caos-estado-otro")
	ns, untouched, p, o := l.behindProxy("caos-estado", "estado", n, 1, "--namespace="+other)
	annotation := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"pod-ready.stage.kwok.x-k8s.io/delay":%q}}}}}`, ready.String())
	for i := range n {
		l.Kubectl("patch", "deployment", fmt.Sprintf("promo-%d", i), "-n", ns, "--type=merge", "-p", annotation)
	}
	l.setUp(ns, untouched)
	p.set(faults{watchDelay: lag, lagOnly: "promociones"})
	start := time.Now()
	for i := range n {
		l.Kubectl("delete", "pods", "-n", ns, "-l", "tienda.example.com/promocion="+fmt.Sprintf("promo-%d", i), "--wait=false")
	}
	l.converge(ns, untouched, start, &r)
	if changed := untouchedOther(); len(changed) > 0 {
		l.T.Errorf("the user's objects in %s changed: %v", other, changed)
	}
	// The fault matters when the operator wrote Desplegando and then Listo:
	// the pod was Ready (ready) before its cache could show the first write (lag).
	l.AuditFlushed()
	writes := map[string]int{}
	for _, w := range l.OperatorWrites(start) {
		if w.Verb == "update" && w.Code < 300 && strings.HasPrefix(w.Object, "promociones/"+ns+"/") && strings.HasSuffix(w.URI, "/status") {
			writes[w.Object]++
		}
	}
	twice := 0
	for _, k := range writes {
		if k >= 2 {
			twice++
		}
	}
	if twice == 0 {
		l.T.Errorf("no Promocion's status was written twice (Desplegando, then Listo) after its pod went: the scenario tested nothing")
	}
	p.set(faults{})
	o.Stop(l.T)
	r.cases = n
	r.notes = fmt.Sprintf("%d pods deleted while %s; %d of %d Promociones written Desplegando and then Listo", n, p.mustHaveInjected(l.T, faultLag), twice, n)
	return r
}

// heldWatches holds every watch stream of a running operator while 20
// changes are made, then lets them flow: the operator sees the end of it,
// not each step.
func heldWatches(l *lesson, n int) result {
	r := result{scenario: "Unobserved states", faults: fmt.Sprintf("watches held while %d changes happen (banners, replicas, deletes and recreates), then released", n)}
	ns, untouched, p, o := l.behindProxy("caos-invisible", "retenido", 4, 1)
	p.hold()
	for i := range n {
		name := fmt.Sprintf("promo-%d", i%4)
		switch i % 4 {
		case 0:
			l.setBanner(ns, name, fmt.Sprintf("cambio %d", i))
		case 1:
			l.Kubectl("patch", "promocion", name, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, i%3))
		case 2:
			l.Kubectl("delete", "promocion", name, "-n", ns)
			if err := l.C.Create(context.Background(), framework.Promocion(ns, i%4, 1)); err != nil {
				l.T.Fatalf("making %s again: %v", name, err)
			}
		default:
			l.Kubectl("delete", "deployment", name, "-n", ns, "--ignore-not-found") // gone already if deleted before: nothing sees it
		}
	}
	p.release()
	start := time.Now()
	l.converge(ns, untouched, start, &r)
	o.Stop(l.T)
	r.cases = n
	r.notes = fmt.Sprintf("%d changes made while its watches were held (%s), then released; the end is right", n, p.mustHaveInjected(l.T, faultHeld))
	return r
}

// network runs an operator through one kind of network fault while
// Promociones change, then without it, and checks the world and the rate of
// its requests.
func network(l *lesson, name string, f faults, during time.Duration) result {
	r := result{scenario: "Network: " + name}
	// A 429's Retry-After keeps a reconcile from its write while the next
	// event's reconcile reads a cache a moment behind: its write may then be
	// refused once, per object, after the world is right.
	l.conflictsAfter = f.throttle > 0
	ns, untouched, p, o := l.behindProxy("caos-red-"+strings.ReplaceAll(strings.ToLower(name), " ", "-"), "red", 5, 1)

	p.set(f)
	before := p.requests.Load()
	begun := time.Now()
	for i := 0; time.Since(begun) < during; i++ {
		l.setBanner(ns, fmt.Sprintf("promo-%d", i%5), fmt.Sprintf("cambio %d bajo %s", i, name))
		time.Sleep(during / 10) // the pace of the changes
	}
	rateDuring := float64(p.requests.Load()-before) / time.Since(begun).Seconds()
	p.set(faults{})
	injected := p.mustHaveInjected(l.T, f.kinds()...)
	start := p.over()
	l.converge(ns, untouched, start, &r)
	afterFrom, afterCount := time.Now(), p.requests.Load()
	time.Sleep(3 * time.Second) // the measurement: the rate once the fault is gone
	rateAfter := float64(p.requests.Load()-afterCount) / time.Since(afterFrom).Seconds()
	if o.Exited() {
		l.T.Errorf("%s: the operator exited (%v): it should ride it out", name, o.Err)
	}
	o.Stop(l.T)
	for _, k := range f.kinds() {
		r.cases += int(p.injectedOf(k))
	}
	r.faults = fmt.Sprintf("%s for %s while banners change", name, during)
	l.noStorm(name, rateDuring, rateAfter)
	r.notes = fmt.Sprintf("the fault hit it: %s; its requests: %.1f/s during, %.1f/s after (asserted under %d and %d)", injected, rateDuring, rateAfter, stormDuring, stormAfter)
	return r
}

// No request storm: during a fault, the operator's requests through the
// proxy stay under stormDuring a second (what five Promociones whose banners
// change twice a second can ask, with every retry paced by the backoff, is a
// few a second: 9 at most seen); once it is over and the world right, under
// stormAfter (an idle operator sends nothing but its Lease's renewals, one a
// second with the scenarios' retry period).
const (
	stormDuring = 30
	stormAfter  = 2
)

func (l *lesson) noStorm(fault string, during, after float64) {
	l.T.Helper()
	if during > stormDuring || after > stormAfter {
		l.T.Errorf("%s: the operator's requests, %.1f/s during the fault and %.1f/s after it, above %d and %d: a storm", fault, during, after, stormDuring, stormAfter)
	}
}

// blackhole swallows every request of a leading operator with work in flight
// for d: it cannot renew its Lease, a standby (reaching the API server
// directly) takes over, and the audit log must show no write of the first
// after its lease could have passed. Once the network is back it must recover
// without a restart by hand, and without a storm of requests.
func blackhole(l *lesson, d time.Duration, n int) result {
	r := result{scenario: "Network: blackhole", faults: fmt.Sprintf("every request of the leader swallowed for %s while it leads, with %d Promociones in flight", d, n)}
	ns, untouched := l.scenarioNamespace("caos-agujero")
	for _, sa := range []string{"caos-a", "caos-b"} {
		l.Identity(sa)
	}
	p := l.startProxy("caos-a")
	lease := []string{"--namespace=" + ns, "--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
	a := l.kubelet("agujero-a", p.kubeconfig(l), lease...)
	a.waitRunning(time.Time{})
	l.WaitForLog(a.current(), "a leads", `(?i)successfully acquired lease`)
	b := l.kubelet("agujero-b", l.ServiceAccountKubeconfig("caos-b"), lease...)
	l.WaitForLog(b.current(), "b waits", `(?i)attempting to acquire leader lease`)

	l.CreatePromociones(ns, n, 1) // work in flight when the network goes
	p.swallow()
	swallowed := time.Now()
	before := p.requests.Load()
	l.WaitForLog(b.current(), "b takes over", `(?i)successfully acquired lease`)
	handover := l.LeaseAcquired()
	time.Sleep(d - time.Since(swallowed)) // the length of the blackhole is the fault
	during := float64(p.requests.Load()-before) / time.Since(swallowed).Seconds()
	p.release()
	l.converge(ns, untouched, time.Now(), &r)
	afterFrom, afterCount := time.Now(), p.requests.Load()
	time.Sleep(3 * time.Second) // the measurement: the rate once the network is back
	after := float64(p.requests.Load()-afterCount) / time.Since(afterFrom).Seconds()
	l.AuditFlushed()
	late := l.Audit(handover, func(w framework.Request) bool {
		return w.User == "system:serviceaccount:default:caos-a" && !strings.Contains(w.URI, "/leases/")
	})
	if len(late) > 0 {
		r.wrong += len(late)
		l.T.Errorf("the swallowed leader wrote after the handover:\n%s", framework.First(late, 10))
	}
	a.stop()
	b.stop()
	r.cases = 1
	l.noStorm("the blackhole", during, after)
	r.notes = fmt.Sprintf("%s; handover %s after the blackhole began; the old leader's writes after it: %d; %s; its requests: %.1f/s while swallowed, %.1f/s after (asserted under %d and %d)",
		p.mustHaveInjected(l.T, faultBlackhole), handover.Sub(swallowed).Round(100*time.Millisecond), len(late), a.summary(), during, after, stormDuring, stormAfter)
	return r
}
