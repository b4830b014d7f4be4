package main

import (
	"sync"

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
	stopped           bool
}

func newRepairLane(q priorityqueue.PriorityQueue[reconcile.Request], routine int) *repairLane {
	l := &repairLane{PriorityQueue: q, routine: max(routine, 1), out: map[reconcile.Request]int{}, repairs: map[reconcile.Request]bool{}}
	l.changed = sync.NewCond(&l.mu)
	return l
}

// AddWithOpts queues items. A repair ready now is counted once the queue holds
// it, so that the worker it wakes finds it there.
func (l *repairLane) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	l.PriorityQueue.AddWithOpts(o, items...)
	if o.Priority == nil || *o.Priority < repairPriority || o.After > 0 || o.RateLimited {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		l.repairs[it] = true
	}
	l.changed.Broadcast()
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
		l.changed.Wait()
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
	l.changed.Broadcast()
	return item, priority, shutdown
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

func (l *repairLane) Done(item reconcile.Request) {
	l.PriorityQueue.Done(item)
	l.mu.Lock()
	defer l.mu.Unlock()
	if priority, ok := l.out[item]; ok {
		delete(l.out, item)
		if priority < repairPriority {
			l.routineOut--
		}
	}
	l.changed.Broadcast()
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
