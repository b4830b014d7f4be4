package main

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownStatusWrites are the operator's status writes that its cache has not shown
// yet: for each Promocion, the resourceVersion the API server gave the last,
// or a write still waiting for its answer.
//
// A reconcile skips the status write when the status it computes equals the
// cached one, and the Promocion's watch drops the operator's own writes as
// they come back (promocionChanged). Both are right only if the cached status
// is not older than the operator's last write. Read-your-writes makes a read
// wait for that, but not across namespaces (more than one --namespace turns it
// off) nor across leaders (a new leader's cache may not have the last write of
// the one before). There, a reconcile could find the old status, equal to the
// one it computes, while the API server holds a newer one of the operator's
// that the world has already left behind (Desplegando, say, for a Deployment
// that has since caught up), and nothing would ever queue the Promocion
// again. So a reconcile that finds the cache behind the operator's own write
// asks to be run again, and a status that the operator did not write queues
// the Promocion.
//
// The watch can bring a write back before the API server's answer reaches the
// reconcile, or bring an earlier write after a later one was answered. Each is
// the operator's own, and would queue a reconcile that finds nothing to do
// (in a burst of 5000, one reconcile in six). So the status of any version up
// to the last write counts as the operator's: a status write names the
// version it replaces, so the reconcile that made it had seen every version
// before. And while a write waits for its answer, the watch drops the status
// changes it brings; the answer then tells whether one of them came after
// the write, and if so the reconcile runs again to look at it. A new
// generation always passes.
//
// An entry lives from the write until the watch brings it back: the map holds
// only the writes in flight, not one per Promocion.
type ownStatusWrites struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*ownWrite
}

type ownWrite struct {
	rv      string // the API server's answer to the last write, until the watch brings it
	writing bool   // a write waits for its answer
	dropped string // the latest version that the watch brought while it waited
}

// writing records that a status write of p is about to be sent.
func (s *ownStatusWrites) writing(p *Promocion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[types.NamespacedName]*ownWrite{}
	}
	key := client.ObjectKeyFromObject(p)
	w := s.pending[key]
	if w == nil {
		w = &ownWrite{}
		s.pending[key] = w
	}
	w.writing = true
}

// wrote records the answer to the status write of p: written, p as the API
// server answered it; else the write failed, and the reconcile runs again for
// its error. It tells whether the watch, while the write waited, brought a
// version later than it, whose status the reconcile must look at.
func (s *ownStatusWrites) wrote(p *Promocion, written bool) (later bool) {
	key := client.ObjectKeyFromObject(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.pending[key]
	if w == nil { // forgotten: the Promocion was deleted meanwhile
		return false
	}
	dropped := w.dropped
	w.writing, w.dropped = false, ""
	switch {
	case !written:
		if w.rv == "" || dropped != "" && !newer(w.rv, dropped) {
			delete(s.pending, key) // nothing written that the cache has not shown
		}
		return false
	case dropped != "" && !newer(p.ResourceVersion, dropped): // the watch has brought it already
		delete(s.pending, key)
		return newer(dropped, p.ResourceVersion)
	default:
		w.rv = p.ResourceVersion
		return false
	}
}

// behind tells whether the cached copy p is older than the operator's last
// status write of it.
func (s *ownStatusWrites) behind(p *Promocion) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.pending[client.ObjectKeyFromObject(p)]
	return ok && w.rv != "" && newer(w.rv, p.ResourceVersion)
}

// seen takes p as the cache now holds it, and tells whether its status is the
// operator's own (or one that the operator's last write replaced). The entry
// goes once the cache holds that write or a later version.
func (s *ownStatusWrites) seen(p *Promocion) (own bool) {
	key := client.ObjectKeyFromObject(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.pending[key]
	switch {
	case !ok:
		return false
	case w.writing:
		if w.dropped == "" || newer(p.ResourceVersion, w.dropped) {
			w.dropped = p.ResourceVersion
		}
		return true
	case newer(w.rv, p.ResourceVersion):
		return true
	default:
		delete(s.pending, key)
		return p.ResourceVersion == w.rv
	}
}

func (s *ownStatusWrites) forget(p *Promocion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, client.ObjectKeyFromObject(p))
}

// newer tells whether resourceVersion a is later than b. Every
// kube-apiserver gives integers that compare (KEP-5504); versions that do not
// are taken as not later, which trusts the cache as before.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// statusUnseen is the error of a reconcile whose cache has not yet shown the
// Promocion's latest status: a conflict, which Reconcile requeues as it does
// the API server's.
func statusUnseen(p *Promocion, why error) error {
	return apierrors.NewConflict(GroupVersion.WithResource("promociones").GroupResource(), p.Name, why)
}

var (
	errStatusUnseen = errors.New("the cache has not shown the operator's last status write yet")
	errStatusLater  = errors.New("the watch brought a later version while the status write waited for its answer")
)

// promocionChanged passes a Promocion's update when its generation moved (a
// new spec, or the deletion that the API server bumps it for), or when its
// status changed and the operator did not write it (an earlier leader's write,
// or a hand edit). The operator's own status write coming back would queue a
// reconcile that finds nothing to do, one for every status write. The
// reconcile reads no label or annotation of the Promocion. Creations and
// deletions always pass, and every change to a child queues its Promocion
// through the child's watch.
func (s *ownStatusWrites) promocionChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*Promocion)
			p, okNew := e.ObjectNew.(*Promocion)
			if !okOld || !okNew {
				return true
			}
			own := s.seen(p)
			return old.Generation != p.Generation || !own && !equality.Semantic.DeepEqual(old.Status, p.Status)
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			if p, ok := e.Object.(*Promocion); ok {
				s.forget(p)
			}
			return true
		},
	}
}
