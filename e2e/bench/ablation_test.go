package bench

// The ablation (`make bench-ablation`; a small run in `make test`): each
// mechanism of this operator beyond the careful lesson's, taken out alone,
// run beside the operator as it is and the careful lesson in the same
// interleaved rounds, so that each keeps its place only by a figure users
// feel or a failure it prevents. A variant is the product built with a few
// lines changed (framework.BuildVariant, go build -overlay), or run with a
// flag; its mechanism's lines are counted from the code.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"operador-promociones/e2e/bench/results"
	"operador-promociones/e2e/framework"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ablationScale sizes the ablation: the full one for make bench-ablation, a
// small one in make test, so that it cannot rot.
type ablationScale struct {
	name     string
	repeats  int
	bench    scale    // the recovery round's and the contended run's sizes
	variants []string // the variants run; all if nil
}

var (
	smokeAblation = ablationScale{name: "smoke", repeats: 1, bench: scale{name: "smoke", n: 20, samples: 5, load: 20, flood: 2, sideApply: 10},
		variants: []string{"trabajadores-1", "sin-lectura"}}
	fullAblation = ablationScale{name: "full", repeats: 3, bench: scale{name: "full", n: 1000, samples: 100, load: 1000, flood: 4, sideApply: 300}}
)

// TestAblation runs, in each of its rounds and in a fresh random order, the
// operator as it is, the careful lesson and every variant: a recovery round
// (idle repairs of each kind, then a burst of them while 1000 Promociones
// converge) and a contended convergence of 1000 Promociones (a client
// flooding the API server with lists, a person applying ConfigMaps beside
// it). BENCH_ABLATION=full is make bench-ablation's; it writes its data to
// BENCH_OUT and its report into BENCH_REPORT between the ablation markers.
func TestAblation(t *testing.T) {
	as := smokeAblation
	if os.Getenv("BENCH_ABLATION") == "full" {
		as = fullAblation
	}
	b := newBench(t, as.bench, as.name)
	dir := b.outDir
	data := filepath.Join(dir, "ablation-results.json")

	builds := t.TempDir()
	keys := []string{results.Ours, results.Careful}
	for _, v := range framework.AblationVariants {
		if v.ChaosOnly || as.variants != nil && !slices.Contains(as.variants, v.Key) {
			continue
		}
		c := *b.candidates[results.Ours]
		c.key, c.args = v.Key, v.Args
		if len(v.Edits) > 0 {
			c.binary = suite.BuildVariant(t, builds, v.Key, v.Edits...)
		}
		b.candidates[v.Key] = &c
		b.res.Variants = append(b.res.Variants, results.Variant{Key: v.Key, Mechanism: v.Mechanism, Lines: v.Lines + framework.LinesOf(t, suite.Root, v.Code),
			Args: v.Args, Edits: editStrings(v.Edits)})
		keys = append(keys, v.Key)
	}
	for r := range as.repeats {
		for _, key := range b.order(keys...) {
			b.recoveryRound(b.candidates[key], r)
			b.floodData()
			b.converge("ablation", b.candidates[key], b.sc.n, 1, r, "", nil, func(run *results.Run) {
				run.SideApply, run.SideApplyPerson, run.Applying = b.sideApply(fmt.Sprintf("bench-usuario-%s-%d", key, r))
			})
		}
		b.saveJSON(data) // after each round: a run cut short still leaves what it measured
	}
	// The chaos suite's ablation, run before (hack/ablation-chaos.sh), if it was.
	if raw, err := os.ReadFile(filepath.Join(dir, "ablation-chaos.json")); err == nil {
		if err := json.Unmarshal(raw, &b.res.Chaos); err != nil {
			t.Fatalf("ablation-chaos.json: %v", err)
		}
	}
	b.saveJSON(data)
	report := ablationReport(b.res)
	if file := os.Getenv("BENCH_REPORT"); file != "" {
		if err := framework.Splice(file, "ablation", report); err != nil {
			t.Error(err)
		}
	}
	fmt.Println(report)
}

func editStrings(edits []framework.Edit) []string {
	var out []string
	for _, e := range edits {
		out = append(out, e.String())
	}
	return out
}

// ablationFigures are the figures a user feels, each lower the better, as
// the ablation's table shows them.
var ablationFigures = []struct {
	name string
	of   func(res *results.Results, key string) fig
}{
	{"idle repair p50, ConfigMap (ms)", func(res *results.Results, key string) fig { return repairP50(res, key, "ConfigMap", false) }},
	{"idle repair p50, Deployment (ms)", func(res *results.Results, key string) fig { return repairP50(res, key, "Deployment", false) }},
	{"idle repair p50, Service (ms)", func(res *results.Results, key string) fig { return repairP50(res, key, "Service", false) }},
	{"repair p50 under load (ms)", func(res *results.Results, key string) fig { return repairP50(res, key, "", true) }},
	{"N to Listo, contended (s)", func(res *results.Results, key string) fig {
		return runFig(res, key, func(x results.Run) float64 { return x.Listo })
	}},
	{"a person's kubectl apply beside it (s)", func(res *results.Results, key string) fig {
		return runFig(res, key, func(x results.Run) float64 { return x.SideApplyPerson })
	}},
	{"writes per Promocion, Events included", func(res *results.Results, key string) fig {
		return runFig(res, key, func(x results.Run) float64 { return float64(x.Children+x.Status+x.Events+x.Other) / float64(x.N) })
	}},
	{"RSS settled after them (MiB)", func(res *results.Results, key string) fig {
		return runFig(res, key, func(x results.Run) float64 { return x.SettledMiB })
	}},
}

// repairP50 is the median, over the rounds, of each round's p50 of a
// candidate's repairs: of one kind idle, or of all kinds under load.
func repairP50(res *results.Results, key, kind string, loaded bool) fig {
	byRound := map[int][]float64{}
	for _, s := range res.Recovery {
		if s.Candidate == key && s.Loaded == loaded && (kind == "" || s.Kind == kind) {
			byRound[s.Round] = append(byRound[s.Round], s.Ms)
		}
	}
	var p50s []float64
	for _, ms := range byRound {
		p50s = append(p50s, medianOf(ms))
	}
	return figOf(p50s)
}

func runFig(res *results.Results, key string, f func(results.Run) float64) fig {
	var fs []float64
	for _, x := range res.Runs {
		if x.Section == "ablation" && x.Candidate == key {
			fs = append(fs, f(x))
		}
	}
	return figOf(fs)
}

// beyond says whether a is lower than b beyond the spread of the runs: a's
// whole range below b's, over two runs each at least (one run has no spread).
func beyond(a, b fig) bool { return a.n > 1 && b.n > 1 && a.hi < b.lo }

// ablationReport is the ablation's table, from its results alone; with
// ablation-chaos.json beside them (written by the chaos suite's
// TestAblationChaos), whether each scenario fails without the mechanism.
func ablationReport(res *results.Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s (scale %s, seed %d, commit %s, %s), took %s: every candidate in each of %d rounds, in a fresh random order each round.\n\n",
		res.Started.Format("2006-01-02 15:04 MST"), res.Scale, res.Seed, res.Commit, res.Machine, res.Took, rounds(res))
	fmt.Fprintf(&b, "N = %d Promociones of 1 replica in the contended convergence; %d live shops in each recovery round, and as many deleted at once under load. ", ablationN(res), ablationShops(res))
	fmt.Fprintf(&b, "Each cell: the median over the rounds [lowest, highest]. A mechanism is **kept** when taking it out makes a figure worse beyond the spread of the runs (the variant's whole range above ours'), or when a chaos scenario fails without it; otherwise it is **removed**.\n\n")
	heads := []string{"taken out", "lines"}
	for _, f := range ablationFigures {
		heads = append(heads, f.name)
	}
	heads = append(heads, "what it wins (ours beyond the spread)", "what it costs (the variant beyond the spread)", "verdict")
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(heads, " | "), strings.Repeat(" --- |", len(heads)))
	row := func(key, what string, lines string, verdict func(wins, costs []string) string) {
		cells := []string{what, lines}
		var wins, costs []string
		ours := map[string]fig{}
		for _, f := range ablationFigures {
			x := f.of(res, key)
			cells = append(cells, x.String())
			o := f.of(res, results.Ours)
			ours[f.name] = o
			if key == results.Ours || key == results.Careful {
				continue
			}
			if beyond(o, x) {
				wins = append(wins, fmt.Sprintf("%s %s against %s", f.name, num(o.med), num(x.med)))
			}
			if beyond(x, o) {
				costs = append(costs, fmt.Sprintf("%s %s against %s", f.name, num(o.med), num(x.med)))
			}
		}
		cells = append(cells, cmp.Or(strings.Join(wins, "; "), "–"), cmp.Or(strings.Join(costs, "; "), "–"), verdict(wins, costs))
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	row(results.Ours, "nothing: the operator as it is", "–", func(_, _ []string) string { return "–" })
	row(results.Careful, "the careful lesson (one worker, about 260 lines)", "–", func(_, _ []string) string { return "baseline" })
	chaos := ablationChaos(res)
	for _, v := range res.Variants {
		lines := strconv.Itoa(v.Lines)
		if v.Lines == 0 {
			lines = "a default"
		}
		row(v.Key, fmt.Sprintf("**%s**: %s", v.Key, v.Mechanism), lines, func(wins, _ []string) string {
			failed := chaos[v.Key]
			switch {
			case len(wins) > 0 && len(failed) > 0:
				return "kept: " + strings.Join(failed, ", ") + " fails without it, and the figures"
			case len(failed) > 0:
				return "kept: " + strings.Join(failed, ", ") + " fails without it"
			case len(wins) > 0:
				return "kept: the figures"
			case rounds(res) < minRounds:
				return fmt.Sprintf("not decided: %d of the %d rounds a verdict needs", rounds(res), minRounds)
			}
			return "removed"
		})
	}
	b.WriteString("\nHow each variant is built: ")
	for i, v := range res.Variants {
		how := "flags `" + strings.Join(v.Args, " ") + "`"
		if len(v.Edits) > 0 {
			// An edit's code on one line: a table's text, not a listing.
			how = "the product with " + strings.Join(strings.Fields(strings.Join(v.Edits, "; ")), " ")
		}
		fmt.Fprintf(&b, "%s**%s**, %s", map[bool]string{true: "", false: "; "}[i == 0], v.Key, how)
	}
	b.WriteString(".\n")
	if len(res.Chaos) > 0 {
		b.WriteString("\nThe chaos scenarios that name the failure each mechanism exists to prevent, run with it taken out (`hack/ablation-chaos.sh`, one seed for all; the operator as it is first, which must pass them all):\n\n| run with | scenario | failed | its first failure |\n| --- | --- | --- | --- |\n")
		for _, c := range res.Chaos {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Variant, c.Scenario, map[bool]string{true: "**yes**", false: "no"}[c.Failed], cmp.Or(strings.ReplaceAll(c.Finding, "|", "\\|"), "–"))
		}
	}
	return b.String()
}

// minRounds is the rounds a figure needs before its spread decides anything
// (issue 50: at least three repeats).
const minRounds = 3

func rounds(res *results.Results) int {
	n := 0
	for _, x := range res.Runs {
		n = max(n, x.Repeat+1)
	}
	return n
}

// ablationChaos reads, beside the ablation's results, the chaos scenarios
// each variant failed (ablation-chaos.json, written by the chaos suite's
// TestAblationChaos): variant key to the scenarios that failed without its
// mechanism.
func ablationChaos(res *results.Results) map[string][]string {
	out := map[string][]string{}
	for _, c := range res.Chaos {
		if c.Failed {
			out[c.Variant] = append(out[c.Variant], c.Scenario)
		}
	}
	return out
}

// ablationN is the contended convergence's N; ablationShops the recovery
// rounds' shops, a third of their idle samples.
func ablationN(res *results.Results) int {
	for _, x := range res.Runs {
		return x.N
	}
	return 0
}

func ablationShops(res *results.Results) int {
	n := 0
	for _, s := range res.Recovery {
		if s.Loaded && s.Candidate == results.Ours && s.Round == 0 {
			n++
		}
	}
	return n / 3
}
