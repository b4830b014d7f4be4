package chaos

// Mutants of the fault-handling code, each paired with the scenario meant to
// kill it: the code a fault exists to test, broken the way a plausible bug
// would break it, run through that scenario over several seeds. A pair whose
// mutant the scenario does not kill every time shows a scenario too weak for
// the code it guards. make test runs every pair once, at the short scale,
// and fails if a mutant survives; make chaos runs each over chaosScale's
// pairSeeds and writes the kill rates into RELIABILITY.md.

import (
	"fmt"
	"math/rand/v2"
	"operador-promociones/e2e/framework"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type pair struct {
	name     string
	edits    []framework.Edit
	scenario string                                 // TestChaos's subtest it is paired with
	run      func(l *lesson, rng *rand.Rand) result // that scenario, at the pair's size
	finding  string                                 // what the failure that kills it says
	// equivalent, when set, says why no scenario can kill the mutant: the
	// product behaves the same with and without the edit. It is reported,
	// not run.
	equivalent string
}

// listoRule is the operator's Listo rule (status.go, deploymentCaughtUp):
// each of its clauses dropped is a mutant.
const listoRule = "status.go"

var pairs = []pair{
	{name: "no retry cap", edits: []framework.Edit{{File: "reconciler.go", From: "\t\tRateLimiter:             retries(),\n", To: ""}},
		scenario: "blocked", run: func(l *lesson, _ *rand.Rand) result { return blocked(l, 20) },
		finding: `later than the .* that docs/api.md promises|is not right after`},
	{name: "claim accepting anything", edits: []framework.Edit{{File: "children.go", From: "\tif obj.GetUID() == \"\" {\n\t\treturn nil // not in the cluster", To: "\tif true {\n\t\treturn nil // not in the cluster"}},
		scenario: "blocked", run: func(l *lesson, _ *rand.Rand) result { return blocked(l, 20) },
		// Accepting the team's Service, the mutant tries to make it its own:
		// the Promocion never reports the team's Service in its way (the API
		// server refuses the update as invalid), or the Service changes.
		finding: `the team's Service changed|reports the team's Service in its way: not true`},
	{name: "Listo rule without its replicas asked for", edits: []framework.Edit{{File: listoRule, From: "*d.Spec.Replicas == desired &&", To: "true &&"}},
		equivalent: "computeStatus judges the Deployment that applyChildren has just made ask for the replicas wanted (nil when that failed), so the clause always holds: it survived rollouts in 3 runs of 3 at 7d49779"},
	{name: "Listo rule without the Deployment's observedGeneration", edits: []framework.Edit{{File: listoRule, From: "s.ObservedGeneration >= d.Generation &&", To: "true &&"}},
		scenario: "rollouts", run: rolloutsPaired, finding: neverFinding},
	{name: "Listo rule without its updated replicas", edits: []framework.Edit{{File: listoRule, From: "s.UpdatedReplicas == desired && ", To: ""}},
		scenario: "rollouts", run: rolloutsPaired, finding: neverFinding},
	{name: "Listo rule without its replicas", edits: []framework.Edit{{File: listoRule, From: "s.Replicas == desired && ", To: ""}},
		scenario: "rollouts", run: rolloutsPaired, finding: neverFinding},
	{name: "Listo rule without its ready replicas", edits: []framework.Edit{{File: listoRule, From: " && s.ReadyReplicas == desired", To: ""}},
		scenario: "rollouts", run: rolloutsPaired, finding: neverFinding},
	{name: "Ready always True", edits: []framework.Edit{{File: listoRule, From: `set(ConditionReady, metav1.ConditionFalse, "ReplicasNotReady", replicas)`, To: `set(ConditionReady, metav1.ConditionTrue, "ReplicasNotReady", replicas)`}},
		scenario: "rollouts", run: rolloutsPaired, finding: `is Ready and Desplegando`},
	{name: "the fence off", edits: []framework.Edit{{File: "fence.go", From: "func (f *leaderFence) fence(cfg *rest.Config) *rest.Config {\n\tif f == nil {", To: "func (f *leaderFence) fence(cfg *rest.Config) *rest.Config {\n\tif true {"}},
		scenario: "frozen-leader", run: func(l *lesson, _ *rand.Rand) result { return frozenLeader(l, 20, suite.Operator, true) },
		finding: `the old leader wrote after the handover`},
	{name: "no live read before a repair", edits: []framework.Edit{{File: "reconciler.go", From: "if needsLiveOwner(child, promo) {", To: "if false && needsLiveOwner(child, promo) {"}},
		scenario: "lagging-owners", run: func(l *lesson, _ *rand.Rand) result { return laggingOwners(l, 10, 3*time.Second) },
		finding: `made .* children for Promociones already deleted`},
	{name: "the status-write tracking always caught up", edits: []framework.Edit{{File: "reconciler.go", From: "if r.own.behind(promo) ||", To: "if false ||"}},
		scenario: "lagging-own-status", run: func(l *lesson, _ *rand.Rand) result { return laggingOwnStatus(l, 10, 3*time.Second, time.Second) },
		finding: `caos-estado is not right after`},
	// A past fix of this suite's history (1231f60): a namespace being deleted
	// refuses the operator's creates, which it must take as the end of its
	// work there, not as errors to log and retry.
	{name: "creates in a namespace being deleted taken as errors (undoes 1231f60)", edits: []framework.Edit{{File: "reconciler.go", From: "if some(err, namespaceGoing) {", To: "if false && some(err, namespaceGoing) {"}},
		scenario: "namespace-deletion", run: func(l *lesson, _ *rand.Rand) result { return namespaceDeletion(l, 20) },
		finding: `error lines while the namespace was deleted|created .* objects in the namespace being deleted`},
}

// neverFinding is what the never-seen rule says when Listo comes too soon.
const neverFinding = `says Listo|still serves an older page|had caught up`

func rolloutsPaired(l *lesson, rng *rand.Rand) result { return rollouts(l, rng, 2, 2, 2*time.Second) }

// TestMutantPairs builds each pair's mutant and runs its scenario with it as
// the operator, CHAOS_PAIR_SEEDS times (1 by default: make test), each run
// judged by what it recorded instead of failing the suite: a pair fails when
// its mutant survives a run, or is killed by something else than its finding.
func TestMutantPairs(t *testing.T) {
	seeds := 1
	if os.Getenv("CHAOS_SCALE") == "full" {
		seeds = fullChaos.pairSeeds
	}
	seed := uint64(time.Now().UnixNano())
	dir := t.TempDir()
	var table strings.Builder
	partial := false
	table.WriteString("| mutant | paired with | killed | by |\n| --- | --- | --- | --- |\n")
	for _, p := range pairs {
		if p.equivalent != "" {
			fmt.Fprintf(&table, "| %s: %s | none | equivalent | %s |\n", p.name, editsOf(p.edits), tableCell(p.equivalent))
			continue
		}
		binary := ""
		killed, by, ran := 0, "", 0
		for s := range seeds {
			var failures []string
			did := false
			t.Run(fmt.Sprintf("%s/%d", p.name, s), func(t *testing.T) {
				did = true
				ran++
				if binary == "" { // built here, so that -run can pick one pair
					binary = suite.BuildVariant(t, dir, p.name, p.edits...)
				}
				rec := &recorder{TB: t}
				defer withOperator(binary)()
				done := make(chan struct{})
				go func() { // a scenario's Fatal ends this goroutine, as the testing package's does
					defer close(done)
					rng := rand.New(rand.NewPCG(seed, uint64(s)))
					l := newLesson(rec, rand.New(rand.NewPCG(seed, ^uint64(s))))
					// What kills a pair's mutant is its finding, never the
					// quiet period: the short one spares each run half a minute.
					l.short = true
					p.run(l, rng)
				}()
				<-done
				failures = rec.all()
			})
			if !did { // left out by -run
				continue
			}
			match := regexp.MustCompile(p.finding)
			caught := ""
			for _, f := range failures {
				if caught == "" && match.MatchString(f) {
					caught = f
				}
			}
			switch {
			case len(failures) == 0:
				t.Errorf("mutant %q survived %s (seed %d, run %d)", p.name, p.scenario, seed, s)
			case caught == "":
				t.Errorf("mutant %q was caught by %s, but not by what it is paired for (%q):\n%s", p.name, p.scenario, p.finding, strings.Join(failures, "\n"))
			default:
				killed++
				if by == "" {
					by = firstLine(caught)
				}
			}
		}
		if ran == 0 {
			partial = true
			continue
		}
		fmt.Fprintf(&table, "| %s: %s | %s | %d of %d | %s |\n", p.name, editsOf(p.edits), p.scenario, killed, ran, tableCell(by))
	}
	fmt.Println(table.String())
	// The kill rates are the report, a survivor's too: written whether the
	// pairs passed or not (a survivor fails the test all the same).
	if out := os.Getenv("CHAOS_OUT"); out != "" && !partial { // a run of some pairs is not the report
		if err := framework.Splice(out, "pairs", table.String()); err != nil {
			t.Error(err)
		}
	}
}

// withOperator makes binary the suite's operator until the returned func.
func withOperator(binary string) func() {
	was := suite.Operator
	suite.Operator = binary
	return func() { suite.Operator = was }
}

func editsOf(edits []framework.Edit) string {
	var s []string
	for _, e := range edits {
		s = append(s, strings.ReplaceAll(strings.ReplaceAll(e.String(), "\n", " "), "\t", ""))
	}
	return strings.Join(s, "; ")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if r := []rune(line); len(r) > 200 {
		line = string(r[:200]) + "…"
	}
	return line
}

// recorder is a test's T that records failures instead of failing the
// test: a scenario run with a mutant, which must fail, is judged by what it
// recorded. Fatal ends the scenario's goroutine, as the testing package
// does. It says it has not failed, so that no dump of the cluster follows a
// killed mutant's run.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, s)
	r.Logf("(recorded, as the mutant's run must fail) %s", s)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}

func (r *recorder) Error(args ...any)                 { r.add(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.add(fmt.Sprintf(format, args...)) }
func (r *recorder) Fail()                             { r.add("failed") }
func (r *recorder) Fatal(args ...any)                 { r.add(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.add(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) FailNow()     { r.add("failed"); runtime.Goexit() }
func (r *recorder) Failed() bool { return false }
func (r *recorder) Helper()      {}
