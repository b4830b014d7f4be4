package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestLeaderFence(t *testing.T) {
	var none *leaderFence
	if err := none.check(); err != nil {
		t.Errorf("without leader election every write passes, got %v", err)
	}
	f := &leaderFence{holdFor: time.Minute}
	if f.check() == nil {
		t.Errorf("a replica that never renewed the Lease may write")
	}
	f.renewedAt(time.Now())
	if err := f.check(); err != nil {
		t.Errorf("just renewed, got %v", err)
	}
	f.renewedAt(time.Now().Add(-time.Hour)) // an old renewal does not shorten a newer one
	if err := f.check(); err != nil {
		t.Errorf("an old renewal revoked a newer one: %v", err)
	}
	f.revoke()
	if f.check() == nil {
		t.Errorf("revoked, yet it may write")
	}
	late := &leaderFence{holdFor: time.Minute}
	late.renewedAt(time.Now().Add(-2 * time.Minute)) // renewed, then frozen past the deadline
	if late.check() == nil {
		t.Errorf("a replica past its renew deadline may write")
	}
}

// A replica holding the Lease writes; a replica that renewed it and then
// stalled past its renew deadline (holdFor 1 ns stands for the stall) writes
// nothing: no child, no status, no release of the Lease, no event. Against the
// real API server.
func TestDeposedLeaderWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	lease := func(t *testing.T) *coordinationv1.Lease {
		var l coordinationv1.Lease
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lider"}, &l); err != nil {
			t.Fatal(err)
		}
		return &l
	}
	leaseEvents := func(t *testing.T) []string {
		var list eventsv1.EventList
		if err := k8sClient.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Lease" && e.Reason == "LeaderElection" {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	acquire := func(t *testing.T, holdFor time.Duration) (*fencedLock, client.Client) {
		fence := &leaderFence{holdFor: holdFor}
		recorder, stop, err := startEvents(ctx, kubernetes.NewForConfigOrDie(cfg), k8sClient.Scheme(), fence)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		before := *cfg
		lock, err := newLeaderLock(cfg, ns, "lider", 10*time.Second, fence, recorder)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UserAgent != before.UserAgent || cfg.Timeout != before.Timeout {
			t.Fatalf("newLeaderLock changed the operator's config: user agent %q, timeout %s", cfg.UserAgent, cfg.Timeout)
		}
		now := metav1.Now()
		record := resourcelock.LeaderElectionRecord{HolderIdentity: lock.Identity(), LeaseDurationSeconds: 30, AcquireTime: now, RenewTime: now}
		if _, _, err := lock.Get(ctx); apierrors.IsNotFound(err) {
			err = lock.Create(ctx, record)
			if err != nil {
				t.Fatal(err)
			}
		} else if err := lock.Update(ctx, record); err != nil {
			t.Fatal(err)
		}
		if got := *lease(t).Spec.HolderIdentity; got != lock.Identity() {
			t.Fatalf("the Lease names %s, want %s", got, lock.Identity())
		}
		return lock, fencedClient{k8sClient, fence}
	}
	configMap := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}

	// The leader.
	lock, c := acquire(t, time.Minute)
	if err := c.Create(ctx, configMap("del-lider")); err != nil {
		t.Fatalf("the leader could not write: %v", err)
	}
	lock.RecordEvent("became leader")
	eventually(t, "the event saying who leads", func() error {
		if notes := leaseEvents(t); len(notes) != 1 || !strings.HasSuffix(notes[0], "became leader") {
			return fmt.Errorf("events on the Lease: %q", notes)
		}
		return nil
	})

	// A replica that renews, then stalls past its renew deadline.
	lock, c = acquire(t, time.Nanosecond)
	holder := *lease(t).Spec.HolderIdentity
	for name, write := range map[string]func() error{
		"create":      func() error { return c.Create(ctx, configMap("del-depuesto")) },
		"update":      func() error { return c.Update(ctx, configMap("del-lider")) },
		"delete":      func() error { return c.Delete(ctx, configMap("del-lider")) },
		"status":      func() error { return c.Status().Update(ctx, configMap("del-lider")) },
		"release":     func() error { return lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}) },
		"patch label": func() error { return c.Patch(ctx, configMap("del-lider"), client.Merge) },
	} {
		if err := write(); err != errNotLeader {
			t.Errorf("%s by a deposed leader: %v, want %v", name, err, errNotLeader)
		}
	}
	lock.RecordEvent("stopped leading")
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(configMap("del-depuesto")), configMap("x")); !apierrors.IsNotFound(err) {
		t.Errorf("the deposed leader's ConfigMap: %v, want NotFound", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(configMap("del-lider")), configMap("x")); err != nil {
		t.Errorf("the leader's ConfigMap is gone: %v", err)
	}
	if got := *lease(t).Spec.HolderIdentity; got != holder {
		t.Errorf("the Lease names %q after a deposed leader's release, want %q", got, holder)
	}
	time.Sleep(2 * time.Second) // the event, had it been sent, is written within this
	if notes := leaseEvents(t); len(notes) != 1 {
		t.Errorf("a deposed leader's event was written: %q", notes)
	}
}
