package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	f := &leaderFence{holdFor: time.Minute, grace: time.Second}
	if f.check() == nil {
		t.Errorf("a replica that never renewed the Lease may write")
	}
	renewed := time.Now()
	f.renewedAt(renewed)
	if d, err := f.deadline(); err != nil || !d.Equal(renewed.Add(time.Minute+time.Second)) {
		t.Errorf("just renewed: a write may run until %s (%v), want the renew deadline and the grace after the renewal", d, err)
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
	acquire := func(t *testing.T, holdFor time.Duration) (*fencedLock, client.Client, kubernetes.Interface) {
		fence := &leaderFence{holdFor: holdFor, grace: time.Second}
		fenced := fence.fence(cfg)
		clientset := kubernetes.NewForConfigOrDie(fenced)
		recorder, stop, err := startEvents(ctx, fenced, k8sClient.Scheme())
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
		c, err := client.New(fence.fence(cfg), client.Options{Scheme: k8sClient.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return lock, c, clientset
	}
	configMap := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}

	// The leader.
	lock, c, _ := acquire(t, time.Minute)
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
	lock, c, clientset := acquire(t, time.Nanosecond)
	holder := *lease(t).Spec.HolderIdentity
	if err := c.Get(ctx, client.ObjectKeyFromObject(configMap("del-lider")), configMap("x")); err != nil {
		t.Errorf("a deposed leader cannot read: %v", err)
	}
	for name, write := range map[string]func() error{
		"create":      func() error { return c.Create(ctx, configMap("del-depuesto")) },
		"update":      func() error { return c.Update(ctx, configMap("del-lider")) },
		"delete":      func() error { return c.Delete(ctx, configMap("del-lider")) },
		"status":      func() error { return c.Status().Update(ctx, configMap("del-lider")) },
		"release":     func() error { return lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}) },
		"patch label": func() error { return c.Patch(ctx, configMap("del-lider"), client.Merge) },
		"event": func() error {
			_, err := clientset.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := write(); !errors.Is(err, errNotLeader) {
			t.Errorf("%s by a deposed leader: %v, want %v", name, err, errNotLeader)
		}
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(configMap("del-depuesto")), configMap("x")); !apierrors.IsNotFound(err) {
		t.Errorf("the deposed leader's ConfigMap: %v, want NotFound", err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(configMap("del-lider")), configMap("x")); err != nil {
		t.Errorf("the leader's ConfigMap is gone: %v", err)
	}
	if got := *lease(t).Spec.HolderIdentity; got != holder {
		t.Errorf("the Lease names %q after a deposed leader's release, want %q", got, holder)
	}
}

// A write is given until the fence's deadline, and no longer: here, to a server
// that never answers.
func TestFencedWriteEndsAtTheDeadline(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	f := &leaderFence{holdFor: 200 * time.Millisecond, grace: 300 * time.Millisecond}
	f.renewedAt(time.Now())
	tr := writesThrough{http.DefaultTransport, f.send}
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, hang.URL, nil)
	resp, err := tr.RoundTrip(req)
	closeBody(resp)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Errorf("a write to a server that hangs ended after %s with %v, want the deadline (0.5 s) to end it", took, err)
	}
	// That took 0.5 s: the renew deadline (0.2 s) has passed, and the fence is closed.
	if resp, err := tr.RoundTrip(req); !errors.Is(err, errNotLeader) {
		closeBody(resp)
		t.Errorf("a write past the renew deadline: %v, want %v", err, errNotLeader)
	}
	get, _ := http.NewRequest(http.MethodGet, hang.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	resp, err = tr.RoundTrip(get.WithContext(ctx))
	closeBody(resp)
	if errors.Is(err, errNotLeader) {
		t.Errorf("a read past the renew deadline was refused")
	}
}

func closeBody(resp *http.Response) {
	if resp != nil {
		_ = resp.Body.Close()
	}
}
