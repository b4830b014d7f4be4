package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// BenchmarkWriteCost measures the CPU that each kind of the operator's
// writes costs the API server and etcd, beside the same write without what
// the operator adds to the lesson's: the conditions and the scale fields of
// its status, and the hardening of its Deployment. A Promocion costs three
// creates, two status writes (Desplegando, then Listo) and one Event. On a
// saturated control plane those writes share the cores with people and other
// controllers (BENCHMARKS.md, contention), so this is what ours' features
// cost there, kind by kind. Run with make bench-writes; make test runs it a
// few times per kind, to keep it working.
//
// envtest's API server and etcd serve nothing else while it runs, and the CPU
// is theirs alone, read from /proc: the benchmark's own client is not in it.
func BenchmarkWriteCost(b *testing.B) {
	ns := newNamespace(b)
	ctx := context.Background()
	cpu := controlPlaneCPU(b)
	promocion := func(name string) *Promocion {
		p := &Promocion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: PromocionSpec{Banner: "Rebajas de verano: 50% en todo", Replicas: new(int32(1))}}
		if err := k8sClient.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		return p
	}
	owner := promocion("rebajas-verano")
	// create makes the i-th copy of owner's child of kind k as Reconcile
	// makes it, then changed by change, if any.
	create := func(k childKind, change func(client.Object)) func(int) error {
		return func(i int) error {
			obj := k.New()
			k.Mutate(obj, owner, DefaultWebImage)
			if change != nil {
				change(obj)
			}
			obj.SetName(fmt.Sprintf("%s-%d", k.Name(owner), i))
			obj.SetNamespace(ns)
			if err := controllerutil.SetControllerReference(owner, obj, k8sClient.Scheme()); err != nil {
				return err
			}
			return k8sClient.Create(ctx, obj)
		}
	}
	recorder, eventsDone := countedEvents(b)

	cases := []writeCase{{name: "status", variants: []variant{
		{"ours", statusWrites(promocion("estado-ours"), func(p *Promocion, listo bool) PromocionStatus {
			return computeStatus(p, deploymentAt(p, listo), nil, metav1.Now())
		})},
		// The lesson's status, as the lesson and its careful reader write it.
		{"lesson", statusWrites(promocion("estado-lesson"), func(p *Promocion, listo bool) PromocionStatus {
			if listo {
				return PromocionStatus{ReadyReplicas: 1, Fase: FaseListo}
			}
			return PromocionStatus{Fase: FaseDesplegando}
		})},
	}}}
	for _, k := range childKinds {
		c := writeCase{name: strings.ToLower(k.Kind), variants: []variant{{"ours", create(k, nil)}}}
		switch k.Kind {
		case "Deployment":
			c.variants = append(c.variants, variant{"unhardened", create(k, func(d client.Object) { unharden(d.(*appsv1.Deployment)) })})
		case "Service":
			c.every, c.reset = serviceIPs, func() error {
				// envtest's Service range holds 254 addresses. The API server frees
				// them as it deletes the Services; the pause lets that work end
				// before the next Services are counted.
				err := k8sClient.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace(ns))
				time.Sleep(2 * time.Second)
				return err
			}
		}
		cases = append(cases, c)
	}
	cases = append(cases, writeCase{name: "event", variants: []variant{{"ours", func(i int) error {
		// As applyChildren records a new Promocion's, through the operator's
		// broadcaster, each about a Promocion of its own: the broadcaster folds
		// the Events about one object into a series, written once.
		p := owner.DeepCopy()
		p.Name, p.UID = fmt.Sprintf("%s-%d", owner.Name, i), types.UID(fmt.Sprintf("%s-%d", owner.UID, i))
		var made []childChange
		for _, k := range childKinds {
			made = append(made, childChange{Created: true, Kind: k.Kind, Name: k.Name(p)})
		}
		reason, note := describeChanges(made)
		recorder.Eventf(p, nil, corev1.EventTypeNormal, reason, "Apply", "%s", note)
		return eventsDone()
	}}}})
	seq := 0 // b.Run calls each case with b.N growing: every write makes an object of its own
	for _, k := range cases {
		sinceReset := 0 // writes since k's last reset, over all of b.Run's calls
		b.Run(k.name, func(b *testing.B) {
			// The variants take turns, a few writes each, so that each meets
			// the API server as the others do: its cost grows with what it holds.
			apiserver, etcd := make([]time.Duration, len(k.variants)), make([]time.Duration, len(k.variants))
			for done := 0; done < b.N; done += turn {
				n := min(turn, b.N-done)
				for v, w := range k.variants {
					a0, e0 := cpu()
					for range n {
						seq++
						if err := w.write(seq); err != nil {
							b.Fatal(err)
						}
					}
					a1, e1 := cpu()
					apiserver[v], etcd[v] = apiserver[v]+a1-a0, etcd[v]+e1-e0
				}
				if sinceReset += n * len(k.variants); k.reset != nil && sinceReset+turn*len(k.variants) > k.every {
					b.StopTimer()
					if err := k.reset(); err != nil {
						b.Fatal(err)
					}
					sinceReset = 0
					b.StartTimer()
				}
			}
			for v, w := range k.variants {
				b.ReportMetric(float64(apiserver[v].Microseconds())/1000/float64(b.N), w.name+"-apiserver-ms/op")
				b.ReportMetric(float64(etcd[v].Microseconds())/1000/float64(b.N), w.name+"-etcd-ms/op")
			}
		})
	}
}

// turn is how many writes a variant makes before the next takes its turn:
// few, so that the API server's garbage collections, which come in bursts,
// fall on every variant alike. /proc's 10 ms ticks add up over the turns.
const turn = 10

// serviceIPs is how many Services the benchmark makes before it deletes them:
// fewer than envtest's Service range holds.
const serviceIPs = 200

// writeCase is one kind of write, in variants to compare. A kind whose writes
// use something up makes at most every of them, then resets, uncounted.
type writeCase struct {
	name     string
	variants []variant
	every    int
	reset    func() error
}

// variant makes the i-th write of its kind.
type variant struct {
	name  string
	write func(i int) error
}

// statusWrites writes p's status as status says, at Listo every other time,
// so that each write changes it.
func statusWrites(p *Promocion, status func(p *Promocion, listo bool) PromocionStatus) func(int) error {
	return func(i int) error {
		p.Status = status(p, i%2 == 1)
		return k8sClient.Status().Update(context.Background(), p)
	}
}

// deploymentAt is p's Deployment as its controller reports it while it rolls
// out (listo false) and once its pod is ready.
func deploymentAt(p *Promocion, listo bool) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	d.Generation = 1
	d.Spec.Replicas = new(p.DesiredReplicas())
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}
	if listo {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
	}
	return d
}

// unharden takes from d what the lesson's Deployment lacks: the fields of Pod
// Security's restricted profile, the /tmp volume that the read-only root needs,
// the resources, the readiness probe, and the page's hash.
func unharden(d *appsv1.Deployment) {
	tpl := &d.Spec.Template
	delete(tpl.Annotations, AnnotationPageHash)
	tpl.Spec.SecurityContext = nil
	tpl.Spec.Volumes = slices.DeleteFunc(tpl.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == tmpVolume })
	for i := range tpl.Spec.Containers {
		c := &tpl.Spec.Containers[i]
		c.SecurityContext, c.ReadinessProbe, c.Resources = nil, nil, corev1.ResourceRequirements{}
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == tmpVolume })
	}
}

// countedEvents is the operator's events broadcaster (startEvents), on a sink
// that tells when each Event is written: done waits for the next one.
func countedEvents(b *testing.B) (recorder events.EventRecorder, done func() error) {
	clientset, err := kubernetes.NewForConfig(oneAtATime(cfg))
	if err != nil {
		b.Fatal(err)
	}
	written := make(chan error, 1)
	broadcaster := events.NewBroadcaster(countedSink{&events.EventSinkImpl{Interface: clientset.EventsV1()}, written})
	if err := broadcaster.StartRecordingToSinkWithContext(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(broadcaster.Shutdown)
	return broadcaster.NewRecorder(k8sClient.Scheme(), operatorName), func() error {
		select {
		case err := <-written:
			return err
		case <-time.After(time.Minute):
			return fmt.Errorf("no Event written in a minute")
		}
	}
}

type countedSink struct {
	events.EventSink
	written chan<- error
}

func (s countedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	e, err := s.EventSink.Create(ctx, e)
	s.written <- err
	return e, err
}

// controlPlaneCPU returns a function that reads the CPU time that envtest's
// API server and etcd have used so far.
func controlPlaneCPU(b *testing.B) func() (apiserver, etcd time.Duration) {
	cp := testEnv.ControlPlane
	apiserver := pidWith(b, "kube-apiserver", "--secure-port="+cp.APIServer.Port)
	etcd := pidWith(b, "etcd", "--listen-client-urls="+cp.Etcd.URL.String())
	return func() (time.Duration, time.Duration) { return cpuTime(b, apiserver), cpuTime(b, etcd) }
}

// pidWith finds the process of the binary named name that was given arg.
func pidWith(b *testing.B, name, arg string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) == name && slices.Contains(args, arg) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	b.Fatalf("no %s process with %s", name, arg)
	return 0
}

// cpuTime is a process's user and system time, from /proc/<pid>/stat.
func cpuTime(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100 on
// every Linux that Go runs on.
const clockTicks = 100
