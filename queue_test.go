package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Routine work goes to at most the routine workers at once, however many wait;
// a repair goes at once to a worker beyond them, unless its Promocion is being
// reconciled, and then as soon as that is Done. controller-runtime's own
// priority queue underneath, as in the operator.
func TestRepairLane(t *testing.T) {
	q := newRepairLane(priorityqueue.New[reconcile.Request]("test"), 2)
	for i := range 5 {
		q.Add(laneReq(fmt.Sprintf("nueva-%d", i)))
	}
	got, workers := laneWorkers(q, 4) // two routine workers and two for repairs, as --max-concurrent-repairs adds them
	take := func(want string) reconcile.Request { t.Helper(); return handedOut(t, got, want) }
	next := func(want string) reconcile.Request {
		t.Helper()
		it := take(want)
		if it.Name != want {
			t.Fatalf("handed out %s, want %s", it.Name, want)
		}
		return it
	}
	nothing := func(while string) {
		t.Helper()
		select {
		case it := <-got:
			t.Fatalf("%s handed out while %s", it.Name, while)
		case <-time.After(200 * time.Millisecond):
		}
	}

	first, second := take("nueva-0"), take("nueva-1")
	if first.Name > second.Name {
		first, second = second, first
	}
	if first.Name != "nueva-0" || second.Name != "nueva-1" {
		t.Fatalf("handed out %s and %s, want nueva-0 and nueva-1", first.Name, second.Name)
	}
	nothing("two routine items were out")

	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(repairPriority)}, laneReq("reparada"))
	q.Done(next("reparada"))
	nothing("two routine items were out, and the repair done")

	// A repair of a Promocion that is being reconciled waits for it; its Done
	// frees a routine worker too, for the next routine item.
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(repairPriority)}, first)
	nothing("the repair's Promocion was being reconciled")
	q.Done(first)
	a, b := take("nueva-0 and nueva-2"), take("nueva-0 and nueva-2")
	if names := map[string]bool{a.Name: true, b.Name: true}; !names["nueva-0"] || !names["nueva-2"] {
		t.Fatalf("handed out %s and %s, want nueva-0 (the repair) and nueva-2", a.Name, b.Name)
	}
	nothing("two routine items and a repair were out")
	q.Done(first)
	nothing("two routine items were out, and the repair done")
	q.Done(second)
	next("nueva-3")

	q.ShutDown()
	stopped := make(chan struct{})
	go func() { workers.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("workers waiting for a lane did not stop with the queue")
	}
}

// A Promocion queued again while it is reconciled goes out again the moment
// the queue hears of the first reconcile's Done, possibly to another worker
// before the first one's Done has counted it back in: both Done, both
// routine slots must be free again. (A run of the chaos suite beside the
// benchmarks found an operator idle for five minutes with work queued: each
// such race had lost a slot, and under load the pace allows one.)
func TestRepairLaneRequeuedWhileOut(t *testing.T) {
	pq := &doneThen{PriorityQueue: priorityqueue.New[reconcile.Request]("test")}
	q := newRepairLane(pq, 2)
	got := make(chan reconcile.Request, 4)
	worker := func() {
		if it, _, shutdown := q.GetWithPriority(); !shutdown {
			got <- it
		}
	}
	take := func(what string) reconcile.Request { t.Helper(); return handedOut(t, got, what) }

	promo := laneReq("promo")
	q.Add(promo)
	go worker()
	first := take("the Promocion")
	q.Add(promo) // a watch event while it is reconciled
	go worker()  // the second routine worker, waiting in the queue
	var second reconcile.Request
	pq.then = func() { second = take("the Promocion queued again, once the first reconcile is done") }
	q.Done(first)
	pq.then = nil
	if second != promo {
		t.Fatalf("handed out %v, want %v again", second, promo)
	}
	q.Done(second)

	q.Add(laneReq("a"))
	q.Add(laneReq("b"))
	go worker()
	go worker()
	take("two routine items, with both slots free")
	take("two routine items, with both slots free: a routine slot was lost")
	q.ShutDown()
}

// A repair may go out the moment it is queued, to a worker waiting in the
// queue: once it is done, it must not leave a worker set out for it, which
// would take a routine item past the routine limit.
func TestRepairLaneRepairOutAtOnce(t *testing.T) {
	pq := &doneThen{PriorityQueue: priorityqueue.New[reconcile.Request]("test")}
	q := newRepairLane(pq, 1)
	got, workers := laneWorkers(q, 3) // one routine worker, two for repairs
	take := func(what string) reconcile.Request { t.Helper(); return handedOut(t, got, what) }

	repair := laneReq("reparada")
	var out reconcile.Request
	pq.added = func() { out = take("the repair, to the routine worker waiting in the queue") }
	q.AddWithOpts(priorityqueue.AddOpts{Priority: new(repairPriority)}, repair)
	pq.added = nil
	if out != repair {
		t.Fatalf("handed out %v, want the repair", out)
	}
	q.Done(out)

	q.Add(laneReq("a"))
	q.Add(laneReq("b"))
	routine := take("a routine item")
	select {
	case it := <-got:
		t.Fatalf("%s handed out while a routine item was out, with a routine limit of one", it.Name)
	case <-time.After(300 * time.Millisecond):
	}
	q.Done(routine)
	take("the other routine item")
	q.ShutDown()
	workers.Wait()
}

func laneReq(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "tienda", Name: name}}
}

// laneWorkers starts n workers, each handing what it gets to the channel,
// until the queue shuts down.
func laneWorkers(q *repairLane, n int) (<-chan reconcile.Request, *sync.WaitGroup) {
	got := make(chan reconcile.Request, 10)
	var workers sync.WaitGroup
	for range n {
		workers.Go(func() {
			for {
				item, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				got <- item
			}
		})
	}
	return got, &workers
}

// handedOut is the next item that a worker got, within 10 s.
func handedOut(t *testing.T, got <-chan reconcile.Request, what string) reconcile.Request {
	t.Helper()
	select {
	case it := <-got:
		return it
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing handed out: %s", what)
	}
	return reconcile.Request{}
}

// doneThen is a queue that calls then right after each Done (the moment at
// which it may hand the item out again), and added right after each add.
type doneThen struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	then, added func()
}

func (q *doneThen) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	q.PriorityQueue.AddWithOpts(o, items...)
	if q.added != nil {
		q.added()
	}
}

func (q *doneThen) Done(item reconcile.Request) {
	q.PriorityQueue.Done(item)
	if q.then != nil {
		q.then()
	}
}

// The routine limit climbs to the maximum while writes keep their pace, halves
// down to one while they take several times as long, climbs back when they are
// quick again, and after five minutes of slow writes takes slow for the norm.
// Each kind of write is held to its own pace: creates that cost more than the
// status updates before them are no slowdown.
func TestPace(t *testing.T) {
	p := newPace(16)
	limit := 0
	p.set = func(n int) {
		if n < 1 || n > 16 {
			t.Fatalf("limit %d, outside 1 to 16", n)
		}
		limit = n
	}
	now := time.Now()
	writes := func(n int, kind string, took, every time.Duration) {
		for range n {
			now = now.Add(every)
			p.observe(kind, took, now)
		}
	}
	const status, service = "PUT promociones/status", "POST services"

	writes(200, status, 5*time.Millisecond, 10*time.Millisecond)
	if limit != 16 {
		t.Fatalf("after 200 status updates of 5 ms, limit %d, want 16", limit)
	}
	for range 100 { // Services cost more, and status updates keep theirs
		writes(1, service, 20*time.Millisecond, 10*time.Millisecond)
		writes(1, status, 5*time.Millisecond, 10*time.Millisecond)
	}
	if limit != 16 {
		t.Fatalf("after Services' creates at 20 ms beside status updates at 5 ms, limit %d, want 16", limit)
	}
	writes(40, status, 25*time.Millisecond, 50*time.Millisecond)
	if limit == 16 || limit == 1 {
		t.Fatalf("after 40 status updates five times as slow, limit %d, want cut, and not yet to 1", limit)
	}
	writes(100, status, 25*time.Millisecond, 50*time.Millisecond)
	if limit != 1 {
		t.Fatalf("after 140 status updates five times as slow, limit %d, want 1", limit)
	}
	writes(300, status, 5*time.Millisecond, 10*time.Millisecond)
	if limit != 16 {
		t.Fatalf("after 300 status updates back at 5 ms, limit %d, want 16", limit)
	}
	writes(100, status, 25*time.Millisecond, time.Second)
	if limit != 1 {
		t.Fatalf("after 100 s of status updates five times as slow, limit %d, want 1", limit)
	}
	writes(400, status, 25*time.Millisecond, time.Second)
	if limit != 16 {
		t.Fatalf("after 500 s of status updates at 25 ms, the new norm, limit %d, want 16", limit)
	}
}

func TestWriteKindOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/tienda/configmaps":                                            "POST configmaps",
		"/apis/apps/v1/namespaces/tienda/deployments/rebajas-verano":                      "POST deployments",
		"/apis/tienda.example.com/v1/namespaces/tienda/promociones/rebajas-verano/status": "POST promociones/status",
		"/api/v1/namespaces": "POST namespaces",
	} {
		r, err := http.NewRequest(http.MethodPost, "https://127.0.0.1:6443"+path+"?fieldManager=operador-promociones", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := writeKindOf(r); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// The time from a repair's Add to its Done by a worker, on an idle lane with
// the operator's default workers: 16 routine and 32 for repairs. Each repair
// is followed, as in the operator, by a routine item for the same Promocion
// (its new child's watch event).
func BenchmarkRepairLaneIdle(b *testing.B) {
	const routine, repairs = 16, 32
	q := newRepairLane(priorityqueue.New[reconcile.Request]("bench"), routine)
	done := make(chan struct{}, 1)
	var workers sync.WaitGroup
	for range routine + repairs {
		workers.Go(func() {
			for {
				item, priority, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				q.Done(item)
				if priority >= repairPriority {
					done <- struct{}{}
				}
			}
		})
	}
	item := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "tienda", Name: "rebajas-verano"}}
	b.ResetTimer()
	for range b.N {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: new(repairPriority)}, item)
		<-done
		q.Add(item)
	}
	b.StopTimer()
	q.ShutDown()
	workers.Wait()
}
