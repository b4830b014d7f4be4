// Package results is what the benchmark measures, as it writes it into
// bench-results.json: its one description. The benchmark (e2e/bench) writes
// it and its report, and hack/plots draws from it.
package results

import (
	"slices"
	"strings"
	"time"
)

// The candidates' keys, in the report's order.
const (
	Ours    = "ours"
	Leccion = "leccion"
	Careful = "careful" // the lesson's operator, written carefully
	Plain   = "plain"
)

var CandidateNames = map[string]string{Ours: "operador-promociones", Leccion: "the lesson's operator", Careful: "the lesson's operator, careful", Plain: "plain client"}

// Lessons are the two lesson baselines: every goal set against the lesson's
// operator compares with the better of them.
var Lessons = []string{Leccion, Careful}

// Results is everything measured; the report and the plots (hack/plots) are
// made from it alone.
type Results struct {
	Scale    string           `json:"scale"`
	Commit   string           `json:"commit,omitempty"` // the commit it ran on (framework.Commit)
	Seed     uint64           `json:"seed"`
	Started  time.Time        `json:"started"`
	Took     string           `json:"took"`
	Machine  string           `json:"machine"`
	Cores    int              `json:"cores"`
	Cluster  []Component      `json:"cluster"`
	Recovery []RecoverySample `json:"recovery"`
	Inside   []Inside         `json:"inside"`
	Runs     []Run            `json:"runs"`
	Failover []FailoverRun    `json:"failover"`
	Profiles []HeapProfile    `json:"profiles,omitempty"` // taken at the end of some scale runs
	Noise    []Noise          `json:"noise"`              // taken before each recovery round, beside each run's own
	Notes    []string         `json:"notes"`
	Sections []SectionTime    `json:"sections"` // how long each section took
	Parts    []string         `json:"parts"`    // the runs whose sections this holds: when, which, seed
	// The ablation's (its own file, ablation-results.json): the variants of
	// this operator it ran, each with one mechanism taken out.
	Variants []Variant `json:"variants,omitempty"`
	// Chaos is the chaos suite's ablation (TestAblationChaos), joined in: the
	// scenarios run with a mechanism taken out, and whether each failed.
	Chaos []ChaosCheck `json:"chaos,omitempty"`
}

// ChaosCheck is one chaos scenario run with a variant of this operator.
type ChaosCheck struct {
	Variant  string `json:"variant"`
	Scenario string `json:"scenario"`
	Failed   bool   `json:"failed"`
	Finding  string `json:"finding,omitempty"` // the first failure, when it failed
}

// Variant is this operator with one mechanism taken out, for the ablation.
type Variant struct {
	Key       string   `json:"key"`
	Mechanism string   `json:"mechanism"`
	Lines     int      `json:"lines"`           // the mechanism's, counted from the code
	Args      []string `json:"args,omitempty"`  // flags that take it out
	Edits     []string `json:"edits,omitempty"` // or lines changed, for go build -overlay
}

type Noise struct {
	Calibration float64 `json:"calibration_ms"`
	Load1       float64 `json:"load1"`
}

type SectionTime struct {
	Name    string  `json:"name"`
	Minutes float64 `json:"minutes"`
}

type Component struct {
	Name string `json:"name"`
	Args string `json:"args"`
}

type RecoverySample struct {
	Candidate  string  `json:"candidate"`
	Kind       string  `json:"kind"`
	Loaded     bool    `json:"loaded"`
	Converging bool    `json:"converging"` // under load: it was back before the load had all converged
	Round      int     `json:"round"`
	Ms         float64 `json:"ms"`
}

// HeapProfile is the top of an operator's heap profile (in-use space, after a
// garbage collection: what is live), taken once its scale run had settled.
type HeapProfile struct {
	Candidate string   `json:"candidate"`
	N         int      `json:"n"`
	File      string   `json:"file"`  // under the benchmark's output directory
	Total     string   `json:"total"` // the in-use space the profile accounts for
	Flat      []string `json:"flat"`  // go tool pprof -top: by function, what each allocated itself
	Cum       []string `json:"cum"`   // go tool pprof -top -cum: by call site, with what it called
}

// Run is one convergence: N Promociones created at once, followed until all
// are Listo.
type Run struct {
	Section   string  `json:"section"` // headline, contention, qps, scale, fsync
	Candidate string  `json:"candidate"`
	Variant   string  `json:"variant,omitempty"`
	N         int     `json:"n"`
	Replicas  int     `json:"replicas"`
	Repeat    int     `json:"repeat"`
	Written   float64 `json:"written_s"` // every Promocion has its children and a status
	Listo     float64 `json:"listo_s"`   // every Promocion is Listo
	// Writes by the candidate's ServiceAccount, from the audit log.
	Children, ChildUpdates, Status, Events, Leases, Other, Conflicts int
	APIRequests                                                      float64 `json:"api_requests"` // the API server's, all clients
	CPUSeconds, PeakMiB, SettledMiB                                  float64
	// The settled RSS's two parts: anonymous (heap, stacks, runtime) and
	// file-backed (the binary's touched pages).
	AnonMiB         float64            `json:"anon_mib,omitempty"`
	FileMiB         float64            `json:"file_mib,omitempty"`
	SideApply       float64            `json:"side_apply_s,omitempty"`        // a user's kubectl apply, in a contended run: a ServiceAccount
	SideApplyPerson float64            `json:"side_apply_person_s,omitempty"` // and a person, at the same time
	APF             map[string]APFWait `json:"apf,omitempty"`                 // by priority level, during the users' applies
	// The candidate's writes in flight at the API server while the users
	// applied, on average: each write's time from received to answered, in
	// the audit log, over the applies' time.
	InFlight    *float64     `json:"writes_in_flight,omitempty"` // nil: not measured (a run before issue 26's last change)
	Applying    [2]time.Time `json:"-"`                          // when the users' applies began and ended
	Calibration float64      `json:"calibration_ms"`
	Load1       float64      `json:"load1"`
	// CPU-seconds from the start to the last Listo, by process: the cluster's
	// components, the operator, and the harness (its watches and creates).
	CPUToListo map[string]float64 `json:"cpu_to_listo_s,omitempty"`
}

// Inside is where an operator's time went during a round's idle recoveries,
// or its burst of deletions under load (Loaded), from its controller-runtime
// metrics: means per reconcile.
type Inside struct {
	Candidate   string  `json:"candidate"`
	Round       int     `json:"round"`
	Loaded      bool    `json:"loaded,omitempty"`
	Reconciles  float64 `json:"reconciles"`
	QueuedMs    float64 `json:"queued_ms"`     // from queued to taken by a worker
	ReconcileMs float64 `json:"reconcile_ms"`  // Reconcile itself
	WaitMs      float64 `json:"cache_wait_ms"` // of which waiting for the cache to hold the operator's own writes, per Get
	Gets        float64 `json:"cache_gets"`
	APIMs       float64 `json:"api_ms,omitempty"` // and waiting on the API server, per request (ours only: rest_client_request_duration_seconds)
	Requests    float64 `json:"api_requests,omitempty"`
}

// APFWait is the API server's queueing of one priority level of API
// Priority and Fairness: the time its requests waited in its queues, in
// total, and how many it let through.
type APFWait struct {
	Ms       float64 `json:"wait_ms"`
	Requests float64 `json:"requests"`
}

// APFSince is what each priority level waited and let through between two
// readings of the totals.
func APFSince(after, before map[string]APFWait) map[string]APFWait {
	out := map[string]APFWait{}
	for level, a := range after {
		if n := a.Requests - before[level].Requests; n > 0 {
			out[level] = APFWait{Ms: a.Ms - before[level].Ms, Requests: n}
		}
	}
	return out
}

type FailoverRun struct {
	Kill   string  `json:"kill"` // SIGKILL or SIGTERM
	Warmup bool    `json:"warmup"`
	Ms     float64 `json:"ms"`
}

// Drop removes what was measured for section, and its name from the parts.
func (r *Results) Drop(section string) {
	r.Runs = slices.DeleteFunc(r.Runs, func(x Run) bool { return x.Section == section || strings.HasPrefix(x.Section, section+"-") })
	if note, ok := map[string]string{"contention": "alone-apply", "steady": "steady=", "fsync": "fsync-etcd="}[section]; ok {
		r.Notes = slices.DeleteFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, note) })
	}
	switch section {
	case "recovery":
		r.Recovery, r.Inside, r.Noise = nil, nil, nil
	case "failover":
		r.Failover = nil
	case "scale":
		r.Profiles = nil
	}
	r.Sections = slices.DeleteFunc(r.Sections, func(s SectionTime) bool { return s.Name == section })
	var parts []string
	for _, p := range r.Parts {
		run, secs, _ := strings.Cut(p, "): ")
		if left := slices.DeleteFunc(strings.Split(secs, ", "), func(s string) bool { return s == section }); len(left) > 0 {
			parts = append(parts, run+"): "+strings.Join(left, ", "))
		}
	}
	r.Parts = parts
}

// TotalCPUToListo is the CPU-seconds of every process measured, from the start to
// the last Listo.
func (x Run) TotalCPUToListo() float64 {
	t := 0.0
	for _, v := range x.CPUToListo {
		t += v
	}
	return t
}
