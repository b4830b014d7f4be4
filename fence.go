package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Leader election alone does not stop a deposed leader from writing. A replica
// frozen past its lease (SIGSTOP, a stalled VM, a long pause) wakes up with
// reconciles in flight and a queue of watch events, and acts on them before its
// leader elector notices that another replica leads. The fence closes that gap:
// a replica writes only while it is sure to hold the Lease, that is for
// RenewDeadline after it started its last successful renewal. A standby takes
// the Lease over only LeaseDuration after it saw that renewal, and
// RenewDeadline is shorter.

// errNotLeader is what a write gets from a replica not sure to lead.
var errNotLeader = errors.New("not sure to hold the Lease " + operatorName + " any more, so writing nothing")

// leaderFence tells whether this replica may write. A nil fence (no leader
// election) always may.
type leaderFence struct {
	holdFor time.Duration // RenewDeadline
	mu      sync.Mutex
	until   time.Time // read with the monotonic clock, which runs on while the process is stopped
}

func (f *leaderFence) check() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().Before(f.until) {
		return nil
	}
	return errNotLeader
}

// guard runs write only while the fence allows it.
func (f *leaderFence) guard(write func() error) error {
	if err := f.check(); err != nil {
		return err
	}
	return write()
}

func (f *leaderFence) renewedAt(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until := start.Add(f.holdFor); until.After(f.until) {
		f.until = until
	}
}

func (f *leaderFence) revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = time.Time{}
}

// fencedLock is the Lease lock, telling the fence about every renewal.
type fencedLock struct {
	resourcelock.Interface
	fence    *leaderFence
	recorder events.EventRecorder
	lease    *coordinationv1.Lease // what its events are about
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r, func() error { return l.Interface.Create(ctx, r) })
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r, func() error { return l.Interface.Update(ctx, r) })
}

func (l *fencedLock) write(r resourcelock.LeaderElectionRecord, write func() error) error {
	if r.HolderIdentity != l.Identity() {
		// Releasing the Lease: only a leader sure of it may, and from the moment
		// it asks, another may lead.
		if err := l.fence.check(); err != nil {
			return err
		}
		l.fence.revoke()
		return write()
	}
	start := time.Now()
	if err := write(); err != nil {
		return err
	}
	l.fence.renewedAt(start)
	return nil
}

// RecordEvent tells, on the Lease, that this replica became leader or stopped
// leading; a deposed one says nothing.
func (l *fencedLock) RecordEvent(what string) {
	if l.fence.check() == nil {
		l.recorder.Eventf(l.lease, nil, corev1.EventTypeNormal, "LeaderElection", "Lead", "%s %s", l.Identity(), what)
	}
}

const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newLeaderLock makes the Lease lock named id in namespace (by default the
// one the operator's pod runs in), with the fence watching its renewals.
func newLeaderLock(cfg *rest.Config, namespace, id string, renewDeadline time.Duration, fence *leaderFence, recorder events.EventRecorder) (*fencedLock, error) {
	if namespace == "" {
		b, err := os.ReadFile(inClusterNamespaceFile)
		if err != nil {
			return nil, errors.New("leader election needs --leader-election-namespace when the operator runs outside a cluster")
		}
		namespace = strings.TrimSpace(string(b))
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = operatorName + "/leader-election"
	// One hung request must not cost the Lease: give up on it in time to retry.
	cfg.Timeout = max(renewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, id, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, err
	}
	return &fencedLock{Interface: lock, fence: fence, recorder: recorder,
		lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: id}}}, nil
}

// fencedClient is a client whose writes pass the fence.
type fencedClient struct {
	client.Client
	fence *leaderFence
}

func (c fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.fence.guard(func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.fence.guard(func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.fence.guard(func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.fence.guard(func() error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.fence.guard(func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.fence.guard(func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c fencedClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c fencedClient) SubResource(name string) client.SubResourceClient {
	return fencedSubResource{c.Client.SubResource(name), c.fence}
}

type fencedSubResource struct {
	client.SubResourceClient
	fence *leaderFence
}

func (s fencedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.fence.guard(func() error { return s.SubResourceClient.Create(ctx, obj, sub, opts...) })
}

func (s fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.fence.guard(func() error { return s.SubResourceClient.Update(ctx, obj, opts...) })
}

func (s fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.fence.guard(func() error { return s.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}

func (s fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.fence.guard(func() error { return s.SubResourceClient.Apply(ctx, obj, opts...) })
}

// fencedSink drops the events of a replica not sure to lead: they would be
// written after another took over.
type fencedSink struct {
	events.EventSink
	fence *leaderFence
}

func (s fencedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if s.fence.check() != nil {
		return e, nil
	}
	return s.EventSink.Create(ctx, e)
}

func (s fencedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if s.fence.check() != nil {
		return e, nil
	}
	return s.EventSink.Update(ctx, e)
}

func (s fencedSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if s.fence.check() != nil {
		return old, nil
	}
	return s.EventSink.Patch(ctx, old, data)
}
