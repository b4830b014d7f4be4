package lesson

import (
	"bufio"
	"fmt"
	"operador-promociones/e2e/framework"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A machine lost, on the lesson's two-node cluster: the node that holds the
// operator's leader is killed at once (its namespaces' first process, so every
// process and container on it goes with no goodbye). The node goes NotReady,
// the other replica takes the Lease, the web pods are replaced on the other
// node, and the Promocion goes through Desplegando back to Listo. The page is
// fetched through the Service from the surviving node every 100 ms all along,
// and the figures say how long it was unreachable and how long until Listo.
//
// The timings are the local cluster's test-sized ones (hack/cluster.sh): a
// silent node is NotReady after 20 s (--node-monitor-grace-period, 50 s by
// default) and its pods are evicted 30 s later (the API server's
// --default-unreachable-toleration-seconds, 300 s by default): longer than
// the operator's Lease, as with the defaults, so that the other replica leads
// while the shop is short of its lost pod, and says so.
func TestNodeLoss(t *testing.T) {
	l := newLessonOnRealNodes(t)
	l.deployInCluster()
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos", "ejemplos", "rebajas-verano.yaml"))
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "promocion", framework.LessonName, "--ignore-not-found") })
	l.waitForOperatorPods("default", 2)
	l.waitForWebPods(3, framework.LessonBanner)

	leader := l.leaseHolder("default")
	lost := l.Kubectl("get", "pod", leader, "-o", "jsonpath={.spec.nodeName}")
	survivor := framework.RealNodes[0]
	if survivor == lost {
		survivor = framework.RealNodes[1]
	}
	l.ensureWebPodOn(lost, survivor)
	l.Logf("the leader, %s, runs on %s; %s's web pods: %s", leader, lost, lost, l.webPodsOn(lost))

	ip := l.Kubectl("get", "service", framework.LessonName, "-o", "jsonpath={.spec.clusterIP}")
	probe := l.probePage(survivor, ip)
	fases := l.watchFase()
	t.Cleanup(func() { // the next tests need both nodes
		if out, err := suite.ClusterSh("up").CombinedOutput(); err != nil {
			t.Errorf("hack/cluster.sh up, to bring %s back: %v\n%s", lost, err, out)
		}
		l.Eventually(lost+" Ready again", func() error { return l.nodeReady(lost, "True") })
	})

	l.Step("1", "hack/cluster.sh kill-node "+lost+": the machine holding the leader is lost")
	if out, err := suite.ClusterSh("kill-node", lost).CombinedOutput(); err != nil {
		t.Fatalf("hack/cluster.sh kill-node %s: %v\n%s", lost, err, out)
	}
	killed := time.Now()
	within := 3 * time.Minute
	notReady := l.WaitFor(lost+" is NotReady (Unknown: its kubelet went silent)", within, 200*time.Millisecond, func() error {
		return l.nodeReady(lost, "Unknown")
	})
	newLeader := l.WaitFor("the other replica holds the Lease", within, 200*time.Millisecond, func() error {
		if h := l.leaseHolder("default"); h == "" || h == leader {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	l.WaitFor("the operator's lost replica replaced on "+survivor, within, 200*time.Millisecond, func() error {
		if on := l.readyPodsOn("app=operador-promociones", survivor); len(on) != 2 {
			return fmt.Errorf("%d operator Pods Ready on %s: %v", len(on), survivor, on)
		}
		return nil
	})
	listo := l.WaitFor("the web pods replaced on "+survivor+", 3 Ready, and Listo again", within, 200*time.Millisecond, func() error {
		if on := l.webPodsOn(survivor); len(on) != 3 {
			return fmt.Errorf("%d web pods Ready on %s: %v", len(on), survivor, on)
		}
		if f := l.Kubectl("get", "promocion", framework.LessonName, "-o", "jsonpath={.status.fase}"); f != "Listo" {
			return fmt.Errorf("fase %s", f)
		}
		return nil
	})
	time.Sleep(time.Second) // the probe's last samples
	seen := fases()
	samples := probe()

	if !strings.Contains(strings.Join(seen, " "), "Listo Desplegando") || seen[len(seen)-1] != "Listo" {
		t.Errorf("the fases after the loss: %v, want Listo, then Desplegando, then Listo", seen)
	}
	down, longest, failed := outage(samples)
	if len(samples) < 50 {
		t.Fatalf("the probe took %d samples: it did not run", len(samples))
	}
	if last := samples[len(samples)-1]; !last.ok {
		t.Errorf("the page is still unreachable through the Service at the end")
	}
	l.Logf("the fases of %s after the loss: %s", framework.LessonName, strings.Join(seen, " → "))
	l.Logf("FIGURE node lost: NotReady after %s, the Lease taken after %s, Listo again after %s",
		notReady.Sub(killed).Round(100*time.Millisecond), newLeader.Sub(killed).Round(100*time.Millisecond), listo.Sub(killed).Round(100*time.Millisecond))
	l.Logf("FIGURE the page through the Service, from %s every 100 ms: %d of %d fetches failed, over %s from the first failure to the last; the longest run of failures %s",
		survivor, failed, len(samples), down.Round(100*time.Millisecond), longest.Round(100*time.Millisecond))
}

// deployInCluster runs the operator in the cluster as the lesson's Step 4 to
// 6 leave it: the image pushed, the pull secret, manifiestos/ applied.
func (l *lesson) deployInCluster() {
	l.T.Helper()
	l.pushOperatorImage()
	l.createPullSecret("default")
	l.removeOperatorAtCleanup()
	l.Kubectl("apply", "-f", filepath.Join(l.Root, "manifiestos"))
}

func (l *lesson) nodeReady(node, want string) error {
	if got := l.Kubectl("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); got != want {
		return fmt.Errorf("%s Ready is %q", node, got)
	}
	return nil
}

// webPodsOn lists rebajas-verano's pods Ready on node, not on their way out.
func (l *lesson) webPodsOn(node string) []string {
	return l.readyPodsOn("tienda.example.com/promocion="+framework.LessonName, node)
}

// readyPodsOn lists the pods of a label selector Ready on node, not on their way out.
func (l *lesson) readyPodsOn(selector, node string) []string {
	out := l.Kubectl("get", "pods", "-l", selector, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
	var on []string
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[1] == node && f[2] == "True" {
			on = append(on, f[0])
		}
	}
	return on
}

// ensureWebPodOn makes sure that node holds a web pod, so that losing it
// takes part of the shop: the scheduler spreads a ReplicaSet's pods by
// default, but only as a preference. If it holds none, other is cordoned and
// one of its web pods deleted, so that the replacement lands on node.
func (l *lesson) ensureWebPodOn(node, other string) {
	l.T.Helper()
	if len(l.webPodsOn(node)) > 0 {
		return
	}
	l.Kubectl("cordon", other)
	defer l.Kubectl("uncordon", other)
	l.Kubectl("delete", "pod", l.webPodsOn(other)[0])
	l.Eventually("a web pod Ready on "+node, func() error {
		if len(l.webPodsOn(node)) == 0 {
			return fmt.Errorf("none")
		}
		return nil
	})
	l.waitForWebPods(3, framework.LessonBanner)
}

// watchFase polls rebajas-verano's fase every 100 ms until the returned
// function is called, which returns each fase seen, in order, repeats left out.
func (l *lesson) watchFase() func() []string {
	var (
		mu   sync.Mutex
		seen []string
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			if f, err := l.TryKubectl("get", "promocion", framework.LessonName, "-o", "jsonpath={.status.fase}"); err == nil && f != "" {
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != f {
					seen = append(seen, f)
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

type sample struct {
	at time.Time
	ok bool
}

// probePage fetches http://ip/ from node every 100 ms (curl, 1 s at most
// each), inside the node, until the returned function is called, which
// returns every fetch: when, and whether it served the page.
func (l *lesson) probePage(node, ip string) func() []sample {
	l.T.Helper()
	script := `while :; do c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 http://` + ip + `/); echo "$(date +%s%N) $c"; sleep 0.1; done`
	cmd := suite.ClusterSh("node", node, "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.T.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.T.Fatal(err)
	}
	var samples []sample
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			samples = append(samples, sample{time.Unix(0, ns), f[1] == "200"})
		}
	}()
	stop := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }
	l.T.Cleanup(stop)
	return func() []sample {
		stop()
		<-read
		return samples
	}
}

// outage is how long the page was unreachable: from the first failed fetch
// to the end of the last, the longest run of failed fetches, and how many failed.
func outage(samples []sample) (span, longest time.Duration, failed int) {
	var first, last, runStart time.Time
	for i, s := range samples {
		end := s.at
		if i+1 < len(samples) {
			end = samples[i+1].at
		}
		if s.ok {
			runStart = time.Time{}
			continue
		}
		failed++
		if first.IsZero() {
			first = s.at
		}
		last = end
		if runStart.IsZero() {
			runStart = s.at
		}
		longest = max(longest, end.Sub(runStart))
	}
	return last.Sub(first), longest, failed
}
