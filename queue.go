package main

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// repairLane is the controller's priority queue with a lane kept for repairs.
// Routine work (new and changed Promociones, resyncs, retries) goes to at most
// routine workers at once; a repair (an owner queued at repairPriority by
// repairFirst) goes to any idle worker, and the controller has more workers
// than routine.
//
// The priority alone puts a repair at the head of the queue, but under load
// the head still waits for a worker: a thousand new Promociones keep every
// routine worker busy, a reconcile then takes several slow requests, and two
// hundred shops that lose their children at once queue behind each other for
// those few workers. The lane's workers are idle until a child is deleted, so
// they add nothing to the API server's load in the routine case.
type repairLane struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	routine int

	mu      sync.Mutex
	changed *sync.Cond
	// out holds the items handed out and not Done yet, with their priority.
	out map[reconcile.Request]int
	// routineOut counts the routine items out.
	routineOut int
	// repairs holds the repairs queued and not handed out.
	repairs map[reconcile.Request]bool
	// Workers on their way to the queue: for a routine item, or for a repair.
	// The queue hands any of them a ready repair before a routine item.
	reserved, claimed int
	// waiting counts the workers waiting for a lane.
	waiting int
	stopped bool
}

func newRepairLane(q priorityqueue.PriorityQueue[reconcile.Request], routine int) *repairLane {
	l := &repairLane{PriorityQueue: q, routine: max(routine, 1), out: map[reconcile.Request]int{}, repairs: map[reconcile.Request]bool{}}
	l.changed = sync.NewCond(&l.mu)
	return l
}

// AddWithOpts queues items. A repair ready now is counted before the queue
// holds it: the queue may hand it out at once, to a worker already waiting
// there, whose Get must find it counted, or the count would outlive it (and
// keep a worker out for a repair that is not there). A worker that this
// wakes waits in the queue the moment it takes to arrive.
func (l *repairLane) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority != nil && *o.Priority >= repairPriority && o.After == 0 && !o.RateLimited {
		l.mu.Lock()
		for _, it := range items {
			l.repairs[it] = true
		}
		l.wake()
		l.mu.Unlock()
	}
	l.PriorityQueue.AddWithOpts(o, items...)
}

// GetWithPriority waits for a lane, then for an item. A worker sets out for a
// routine item only while fewer than routine are out or on their way, and for
// a repair only while more repairs are ready than workers on their way to the
// queue, which gives each of them a ready repair first. Which item a worker
// gets is the queue's choice, so two may swap, which changes no count once
// both are back: a repair is never routine work.
func (l *repairLane) GetWithPriority() (reconcile.Request, int, bool) {
	l.mu.Lock()
	routine := false
	for !l.stopped {
		if l.routineOut+l.reserved < l.routine {
			routine = true
			l.reserved++
			break
		}
		if l.readyRepairs() > l.reserved+l.claimed {
			l.claimed++
			break
		}
		l.waiting++
		l.changed.Wait()
		l.waiting--
	}
	stopped := l.stopped
	l.mu.Unlock()

	item, priority, shutdown := l.PriorityQueue.GetWithPriority()

	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case stopped:
	case routine:
		l.reserved--
	default:
		l.claimed--
	}
	if !shutdown {
		delete(l.repairs, item)
		l.out[item] = priority
		if priority < repairPriority {
			l.routineOut++
		}
	}
	l.wake() // a worker set out for routine work may have got a repair
	return item, priority, shutdown
}

// wake wakes as many waiting workers as could set out now, and no more: each
// change to the lane would otherwise wake every idle repair worker, and the
// lane's dozens of them then cost an idle repair more than its reconcile.
func (l *repairLane) wake() {
	n := max(0, l.routine-l.routineOut-l.reserved)
	if l.waiting > n && len(l.repairs) > 0 {
		n += max(0, l.readyRepairs()-l.reserved-l.claimed)
	}
	for range min(n, l.waiting) {
		l.changed.Signal()
	}
}

// readyRepairs counts the repairs that the queue can hand out now: one whose
// Promocion is being reconciled waits for that reconcile's Done.
func (l *repairLane) readyRepairs() int {
	n := 0
	for it := range l.repairs {
		if _, busy := l.out[it]; !busy {
			n++
		}
	}
	return n
}

func (l *repairLane) Get() (reconcile.Request, bool) {
	item, _, shutdown := l.GetWithPriority()
	return item, shutdown
}

// Done counts the item back in before the queue hears of it. An item queued
// again while it was out goes out again the moment the queue has its Done,
// and another worker may record it out before this one reaches the lock: the
// count taken back then would be that reconcile's, whose own Done later
// finds nothing to take back, and a routine slot would be lost for good (with
// the pace at one under load, every routine reconcile with it).
func (l *repairLane) Done(item reconcile.Request) {
	l.mu.Lock()
	if priority, ok := l.out[item]; ok {
		delete(l.out, item)
		if priority < repairPriority {
			l.routineOut--
		}
	}
	l.wake() // a routine slot, or a repair that waited for this reconcile: its worker waits in the queue for the Done below
	l.mu.Unlock()
	l.PriorityQueue.Done(item)
}

func (l *repairLane) ShutDown() {
	l.stop()
	l.PriorityQueue.ShutDown()
}

func (l *repairLane) ShutDownWithDrain() {
	l.stop()
	l.PriorityQueue.ShutDownWithDrain()
}

func (l *repairLane) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.changed.Broadcast()
}

// setRoutine changes how many routine items may be out at once. Items out
// beyond a lowered limit finish; no new one goes out until fewer are.
func (l *repairLane) setRoutine(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n = max(n, 1); n != l.routine {
		l.routine = n
		l.changed.Broadcast()
	}
}

// pace sets how many routine reconciles run at once from how fast the API
// server answers the operator's writes: up to --max-concurrent-reconciles
// while they take no more than twice as long as at its quietest in the last
// five minutes, and half as many each time they take longer, down to one.
// Each kind of write (verb and resource) is held to its own quietest: a
// Service's create costs more than a status update, and a burst of creates
// after a quiet spell of status updates is not a slower API server.
//
// A busy API server shares its CPU among the requests it holds, so every
// request in flight slows everyone's: a person's kubectl and the other
// controllers' as well as ours. Measured on a saturated two-core control plane
// (BENCHMARKS.md, contention), 16 routine reconciles at once tripled a user's
// kubectl apply and did not make the Promociones Listo sooner than one. Where
// the API server keeps up, the writes stay quick and all the workers run.
// Repairs are not paced: they have their lane.
type pace struct {
	max int
	set func(int) // the repair lane's setRoutine

	mu       sync.Mutex
	limit    float64
	slowness float64 // of the last writes, weighted: each one's time over its kind's quietest
	kinds    map[string]*writeKind
	sinceCut int // writes since the limit was last cut
	told     int // the limit the lane and the gauge last got
}

const (
	paceSpans   = 10
	paceSpan    = 30 * time.Second
	paceWeight  = 16 // writes that the slowness follows
	kindWeight  = 4  // writes of a kind that its average follows
	paceSlowest = 2  // the slowness past which the limit is cut
)

// writeKind is how fast the writes of one verb and resource came back.
type writeKind struct {
	avg      time.Duration            // of its last writes, weighted
	quietest [paceSpans]time.Duration // least avg in each of the last spans, newest first
	spanFrom time.Time                // when quietest[0]'s span began
}

// observe takes a write's time, and returns the least that its kind's
// average was in the last paceSpans spans.
func (k *writeKind) observe(took time.Duration, now time.Time) time.Duration {
	if k.avg == 0 {
		k.avg = took
	} else {
		k.avg += (took - k.avg) / kindWeight
	}
	if now.Sub(k.spanFrom) >= paceSpan {
		copy(k.quietest[1:], k.quietest[:])
		k.quietest[0], k.spanFrom = k.avg, now
	}
	k.quietest[0] = min(k.quietest[0], k.avg)
	quietest := k.quietest[0]
	for _, q := range k.quietest[1:] {
		if q > 0 {
			quietest = min(quietest, q)
		}
	}
	return quietest
}

func newPace(max int) *pace {
	return &pace{max: max, limit: 1, slowness: 1, kinds: map[string]*writeKind{}, set: func(int) {}}
}

// observe takes the time of a write of kind (its verb and resource, from
// writeKindOf), answered at now.
func (p *pace) observe(kind string, took time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.kinds[kind]
	if k == nil {
		k = &writeKind{}
		p.kinds[kind] = k
	}
	quietest := k.observe(took, now)
	p.slowness += (float64(took)/float64(max(quietest, time.Microsecond)) - p.slowness) / paceWeight

	p.sinceCut++
	switch {
	case p.slowness <= paceSlowest:
		p.limit = min(float64(p.max), p.limit+1/p.limit) // one more for every limit writes that kept up
	case p.sinceCut > paceWeight: // the slowness has followed the last cut
		p.limit, p.sinceCut = max(1, p.limit/2), 0
	}
	if n := int(p.limit); n != p.told {
		p.told = n
		routineLimit.Set(float64(n))
		p.set(n)
	}
}

// writeKindOf names a write by its verb and resource, and subresource if
// any: "POST configmaps", "PUT promociones/status".
func writeKindOf(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch { // past /api/v1 or /apis/group/version
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	kind := r.Method
	if len(parts) > 0 {
		kind += " " + parts[0]
	}
	if len(parts) > 2 {
		kind += "/" + parts[2]
	}
	return kind
}

// follow makes l run as many routine reconciles as p allows.
func (p *pace) follow(l *repairLane) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set, p.told = l.setRoutine, int(p.limit)
	routineLimit.Set(float64(p.told))
	p.set(p.told)
}

// timed makes every write made with cfg tell p how long it took. A nil pace
// changes nothing.
func (p *pace) timed(cfg *rest.Config) *rest.Config {
	if p == nil {
		return cfg
	}
	return onWrites(cfg, p.send)
}

// send sends write r through next and observes how long the API server took
// to answer, whatever it said.
func (p *pace) send(r *http.Request, next http.RoundTripper) (*http.Response, error) {
	start := time.Now()
	resp, err := next.RoundTrip(r)
	if err == nil {
		now := time.Now()
		p.observe(writeKindOf(r), now.Sub(start), now)
	}
	return resp, err
}
