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
// yet: for each Promocion, the resourceVersion the API server gave the last.
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
// An entry lives from the write until the watch brings it back: the map holds
// only the writes in flight, not one per Promocion.
type ownStatusWrites struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]string
}

// wrote records the status write that the API server answered with p.
func (s *ownStatusWrites) wrote(p *Promocion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[types.NamespacedName]string{}
	}
	s.pending[client.ObjectKeyFromObject(p)] = p.ResourceVersion
}

// behind tells whether the cached copy p is older than the operator's last
// status write of it.
func (s *ownStatusWrites) behind(p *Promocion) bool {
	s.mu.Lock()
	rv, ok := s.pending[client.ObjectKeyFromObject(p)]
	s.mu.Unlock()
	return ok && newer(rv, p.ResourceVersion)
}

// seen takes p as the cache now holds it, and tells whether it is the
// operator's own last status write coming back. The entry goes once the cache
// holds that write or a later version.
func (s *ownStatusWrites) seen(p *Promocion) (own bool) {
	key := client.ObjectKeyFromObject(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	rv, ok := s.pending[key]
	if ok && !newer(rv, p.ResourceVersion) {
		delete(s.pending, key)
	}
	return ok && rv == p.ResourceVersion
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

// cacheBehind is the error of a reconcile whose cache has not yet shown the
// operator's own last status write: a conflict, which Reconcile requeues as
// it does the API server's.
func cacheBehind(p *Promocion) error {
	return apierrors.NewConflict(GroupVersion.WithResource("promociones").GroupResource(), p.Name,
		errStatusUnseen)
}

var errStatusUnseen = errors.New("the cache has not shown the operator's last status write yet")

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
