package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election alone does not stop a deposed leader from writing. A replica
// frozen past its lease (SIGSTOP, a stalled VM, a long pause) wakes up with
// reconciles in flight and a queue of watch events, and acts on them before its
// leader elector notices that another replica leads.
//
// The fence closes that gap. A replica writes only while it is sure to hold
// the Lease: for RenewDeadline after it started its last successful renewal. A
// standby takes the Lease over only LeaseDuration after it saw that renewal.
// Every request that would change something leaves through the fence (send),
// which refuses it past RenewDeadline and gives it until half-way to
// LeaseDuration to finish, so that the client has given up on it before a
// standby can lead. Reads and watches pass. (A request the API server has
// already begun may still complete on its side: the fence narrows the window
// to that, it cannot close it.)

// errNotLeader is what a write gets from a replica not sure to lead.
var errNotLeader = errors.New("not sure to hold the Lease " + operatorName + " any more, so writing nothing")

// leaderFence tells whether, and until when, this replica may write. A nil
// fence (no leader election) always may.
type leaderFence struct {
	holdFor time.Duration // RenewDeadline
	grace   time.Duration // half of LeaseDuration - RenewDeadline: a write's time to finish
	mu      sync.Mutex
	until   time.Time // read with the monotonic clock, which runs on while the process is stopped
}

// deadline is when a write sent now must be done, or errNotLeader.
func (f *leaderFence) deadline() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !time.Now().Before(f.until) {
		return time.Time{}, errNotLeader
	}
	return f.until.Add(f.grace), nil
}

func (f *leaderFence) check() error {
	if f == nil {
		return nil
	}
	_, err := f.deadline()
	return err
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

// fence makes every write made with cfg pass f. A nil fence changes nothing.
func (f *leaderFence) fence(cfg *rest.Config) *rest.Config {
	if f == nil {
		return cfg
	}
	return onWrites(cfg, f.send)
}

// send sends write r through next if this replica is sure to lead, with a
// deadline by which a standby cannot lead yet.
func (f *leaderFence) send(r *http.Request, next http.RoundTripper) (*http.Response, error) {
	deadline, err := f.deadline()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	resp, err := next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// onWrites makes every write made with cfg go through send; reads and watches
// pass as they are.
func onWrites(cfg *rest.Config, send func(r *http.Request, next http.RoundTripper) (*http.Response, error)) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return writesThrough{rt, send} })
	return cfg
}

type writesThrough struct {
	next http.RoundTripper
	send func(*http.Request, http.RoundTripper) (*http.Response, error)
}

func (t writesThrough) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isWrite(r) {
		return t.next.RoundTrip(r)
	}
	return t.send(r, t.next)
}

// isWrite says whether r may change something: reads and watches are GETs.
func isWrite(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// cancelOnClose ends a request's context once its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// fencedLock is the Lease lock, telling the fence about every renewal. Its own
// client is not fenced: renewing is how a replica becomes sure to lead.
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
