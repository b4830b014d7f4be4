package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"operador-promociones/e2e/bench/results"
	"operador-promociones/e2e/framework"
	"os"
	"slices"
	"strconv"
	"strings"
)

// report writes the run as Markdown: every figure in it comes from b.res.
func (b *bench) report() string { return reportOf(b.res) }

// benchReport writes the report of a run's results (the file data) again,
// into the file report between its markers (bench, or ablation for the
// ablation's data), or to stdout: no cluster is started.
func benchReport(data, report string) error {
	raw, err := os.ReadFile(data)
	if err != nil {
		return err
	}
	var res results.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	name, text := "bench", reportOf(&res)
	if len(res.Variants) > 0 {
		name, text = "ablation", ablationReport(&res)
	}
	if report == "" {
		fmt.Print(text)
		return nil
	}
	return framework.Splice(report, name, text)
}

// reportOf writes a run's results as Markdown; `make bench-report` writes it
// again from bench/bench-results.json, when only the wording changed.
func reportOf(res *results.Results) string {
	sc := smokeScale
	if res.Scale == fullScale.name {
		sc = fullScale
	}
	r := &reportWriter{res: res, sc: sc}
	r.header()
	for _, s := range []struct {
		title    string
		measured bool
		write    func()
	}{
		{"Recovery of a deleted child", len(res.Recovery) > 0, r.recovery},
		{"Convergence", len(r.runs("headline", "", "")) > 0, r.headline},
		{"Under contention", len(r.runs("contention", "", "")) > 0, r.contention},
		{"Scale", len(r.runs("scale", "", "")) > 0, r.scale},
		{"Memory beside unrelated objects", len(r.runs("memory-empty", "", "")) > 0, r.memory},
		{"Steady state and failover", r.note("steady") != "", r.steadyAndFailover},
		{"The headline with etcd syncing to disk", len(r.runs("fsync", "", "")) > 0, r.fsync},
	} {
		if s.measured {
			s.write()
		} else {
			r.f("### %s\n\nNot measured in this report's run.\n\n", s.title)
		}
	}
	if len(r.runs("memory-unrelated", "", "")) == 0 {
		r.goal = append(r.goal, fmt.Sprintf("| Memory with %d unrelated objects far below (under half) the better lesson baseline's | not measured in this report's run | **not measured** |", sc.unrelated))
	}
	r.goals()
	r.cluster()
	return r.String()
}

// short is each candidate's name in the tables.
var short = map[string]string{results.Ours: "ours", results.Leccion: "lesson", results.Careful: "lesson, careful", results.Plain: "plain"}

// betterLesson is the better (lower) of the two lesson baselines' figures,
// and its name: what every goal against the lesson compares with.
func betterLesson(figs map[string]fig) (fig, string) {
	l, c := figs[results.Leccion], figs[results.Careful]
	if c.n > 0 && (l.n == 0 || c.med < l.med) {
		return c, short[results.Careful]
	}
	return l, short[results.Leccion]
}

type reportWriter struct {
	strings.Builder
	res   *results.Results
	sc    scale
	goal  []string
	slope []string
}

func (r *reportWriter) f(format string, args ...any) { _, _ = fmt.Fprintf(r, format, args...) }

func (r *reportWriter) note(key string) string {
	for _, n := range r.res.Notes {
		if k, v, ok := strings.Cut(n, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// runs are the runs of a section, and of a candidate and variant if given.
func (r *reportWriter) runs(section, cand, variant string) []results.Run {
	var out []results.Run
	for _, x := range r.res.Runs {
		if x.Section == section && (cand == "" || x.Candidate == cand) && x.Variant == variant {
			out = append(out, x)
		}
	}
	return out
}

// present is those of keys that the run measured: the candidates of its
// tables (a report of an older run has the lesson as printed beside them).
func (r *reportWriter) present(keys ...string) []string {
	var out []string
	for _, k := range keys {
		i := slices.IndexFunc(r.res.Runs, func(x results.Run) bool { return x.Candidate == k })
		j := slices.IndexFunc(r.res.Recovery, func(x results.RecoverySample) bool { return x.Candidate == k })
		if i >= 0 || j >= 0 {
			out = append(out, k)
		}
	}
	return out
}

// variantsOf are the flags a section ran candidate c with, its defaults first.
func (r *reportWriter) variantsOf(section, c string) []string {
	out := []string{""}
	for _, x := range r.res.Runs {
		if x.Section == section && x.Candidate == c && !slices.Contains(out, x.Variant) {
			out = append(out, x.Variant)
		}
	}
	return out
}

func pick(runs []results.Run, f func(results.Run) float64) []float64 {
	out := make([]float64, len(runs))
	for i, x := range runs {
		out[i] = f(x)
	}
	return out
}

func (x fig) String() string {
	if x.n == 0 {
		return "–" // not measured in this report's run
	}
	if x.lo == x.hi {
		return num(x.med)
	}
	return fmt.Sprintf("%s [%s, %s]", num(x.med), num(x.lo), num(x.hi))
}

// num prints a figure with three significant digits or so.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// ratio is a÷b of the medians, flagged when the ranges show no difference.
func ratio(a, b fig) string {
	if b.med == 0 {
		return "–"
	}
	s := fmt.Sprintf("%.2f×", a.med/b.med)
	if a.overlaps(b) && a.lo != a.hi {
		s += " (no difference shown)"
	}
	return s
}

func (r *reportWriter) header() {
	calib, loads := []float64{}, []float64{}
	for _, x := range r.res.Runs {
		calib, loads = append(calib, x.Calibration), append(loads, x.Load1)
	}
	for _, x := range r.res.Noise {
		calib, loads = append(calib, x.Calibration), append(loads, x.Load1)
	}
	c, l := figOf(calib), figOf(loads)
	ranOn := "a commit it did not record"
	if r.res.Commit != "" {
		ranOn = "commit " + r.res.Commit
	}
	r.f("Run of %s (scale %s, seed %d): %s; it ran on %s, and took %s.\n\n", r.res.Started.Format("2006-01-02 15:04 MST"), r.res.Scale, r.res.Seed, r.res.Machine, ranOn, r.res.Took)
	sameMachine := true
	for _, p := range r.res.Parts {
		sameMachine = sameMachine && strings.Contains(p, r.res.Machine)
	}
	if len(r.res.Parts) > 1 {
		r.f("This report joins the sections of %d runs of the same harness (`BENCH_SECTIONS`), each section measured whole in one run, its candidates side by side: %s.", len(r.res.Parts), strings.Join(r.res.Parts, "; "))
		if sameMachine {
			r.f(" They ran on the same machine.\n\n")
		} else {
			r.f(" They did not all run on the same machine: compare the candidates within a section, not one section's figures with another's.\n\n")
		}
	}
	var took []string
	total := 0.0
	for _, x := range r.res.Sections {
		took = append(took, fmt.Sprintf("%s %.0f min", x.Name, x.Minutes))
		total += x.Minutes
	}
	if len(took) > 0 {
		where := ""
		if !sameMachine {
			where = " (on more than one machine)"
		}
		r.f("Sections: %s; together %.0f min%s, which with the set-up (the cluster, the ServiceAccounts, the template) is what one `make bench` takes.\n\n", strings.Join(took, ", "), total, where)
	}
	bench := 0.0 // make bench's sections, without those apart
	for _, x := range r.res.Sections {
		if slices.Contains(sections, x.Name) {
			bench += x.Minutes
		}
	}
	if slices.IndexFunc(r.res.Sections, func(x results.SectionTime) bool { return !slices.Contains(sectionsApart, x.Name) }) >= 0 &&
		len(slices.DeleteFunc(slices.Clone(r.res.Sections), func(x results.SectionTime) bool { return !slices.Contains(sections, x.Name) })) == len(sections) {
		total = bench
		figure := fmt.Sprintf("%.0f min", total)
		if len(r.res.Parts) > 1 {
			figure += fmt.Sprintf(", summed over the %d runs that measured them (one uninterrupted run not shown)", len(r.res.Parts))
			if !sameMachine {
				figure += ", on more than one machine"
			}
		}
		r.addGoal("One `make bench` under 90 minutes (its sections together, those of make bench-scale apart)", met(total < 90), figure)
	}
	if len(calib) == 0 {
		r.f("Machine noise: not recorded for these sections (the harness then timed its calibration loop before convergence runs only).\n\n")
	} else {
		r.f("Machine noise over the run's %d measured runs and rounds: the calibration loop (SHA-256 of 64 MiB, CPU-bound) took %s ms, a spread of %.0f%% of its median; the 1-minute load average was %s.\n\n",
			len(calib), c, 100*(c.hi-c.lo)/c.med, l)
	}
	r.f("Candidates, each a ServiceAccount (so API Priority and Fairness puts it in `workload-low`, as in production): **ours** (`operador-promociones`, defaults), **lesson, careful** (the lesson's operator, `e2e/testdata/leccion`, written as the lesson's words ask: its mutate functions setting only the fields they own inside the lists the API server defaults, the selector set only on create, and the status written only when it changed, `-tags careful`; one worker), **plain** (the best plain client: the same writes as ours, by 32 goroutines, each as soon as it can be made)%s. Every run and round starts from the same cluster: etcd's data, saved once after set-up, is put back (`hack/cluster.sh restore`: the control plane killed, the data copied back, the control plane started) and a probe Deployment's Pod made Ready before it begins. Runs are interleaved in a random order (the seed above); a figure is the median of its repeats with [min, max]; a ratio is marked *no difference shown* when either median lies within the other's range.\n\n", map[bool]string{true: "; and, in this older run, **lesson**, the lesson's operator as printed, whose every pass rewrites its children", false: ""}[len(r.present(results.Leccion)) > 0])
}

// whenOf names a recovery's conditions in the report.
func whenOf(loaded bool) string {
	if loaded {
		return "under load"
	}
	return "idle"
}

func (r *reportWriter) recovery() {
	r.f("### Recovery of a deleted child\n\n")
	r.f("%d rounds per candidate, each over %d live shops (Promociones of replicas 0, converged). Idle: %d deletions per child kind, one at a time, of one shop's children. Under load: %d Promociones are created at once in another namespace and, as soon as they all exist, every shop loses its three children at once (%d deletions, 32 at a time), so that each recovery competes with the load's backlog; the time runs from each delete to the watch event of its new object. For each: each round's p50 and p95 (median of the rounds [min, max]) and the p50 and p95 of all samples together. In ms.\n\n", r.sc.rounds, r.sc.samples, r.sc.samples, r.sc.load, 3*r.sc.samples)
	r.f("| child | when | figure | ours | lesson | lesson, careful | plain | ours ÷ the better lesson | ours ÷ plain |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		for _, loaded := range []bool{false, true} {
			when := whenOf(loaded)
			per := map[string]map[string]fig{} // candidate → figure → over rounds
			pooled := map[string][2]float64{}
			for _, c := range r.present(results.Ours, results.Leccion, results.Careful, results.Plain) {
				rounds := map[int][]float64{}
				var all []float64
				for _, s := range r.res.Recovery {
					if s.Candidate == c && s.Kind == kind && s.Loaded == loaded {
						rounds[s.Round] = append(rounds[s.Round], s.Ms)
						all = append(all, s.Ms)
					}
				}
				var p50, p95 []float64
				for _, ms := range rounds {
					slices.Sort(ms)
					p50, p95 = append(p50, percentile(ms, 0.5)), append(p95, percentile(ms, 0.95))
				}
				per[c] = map[string]fig{"p50": figOf(p50), "p95": figOf(p95)}
				if len(all) > 0 {
					slices.Sort(all)
					pooled[c] = [2]float64{percentile(all, 0.5), percentile(all, 0.95)}
				}
			}
			for i, p := range []string{"p50", "p95"} {
				o, pl := per[results.Ours][p], per[results.Plain][p]
				l, _ := betterLesson(map[string]fig{results.Leccion: per[results.Leccion][p], results.Careful: per[results.Careful][p]})
				r.f("| %s | %s | %s of rounds | %s | %s | %s | %s | %s | %s |\n", kind, when, p, o, per[results.Leccion][p], per[results.Careful][p], pl, ratio(o, l), ratio(o, pl))
				bestPooled := min(pooled[results.Leccion][i], pooled[results.Careful][i])
				if bestPooled == 0 {
					bestPooled = max(pooled[results.Leccion][i], pooled[results.Careful][i])
				}
				all := func(c string) string {
					if v, ok := pooled[c]; ok {
						return num(v[i])
					}
					return "–"
				}
				r.f("| %s | %s | %s of all | %s | %s | %s | %s | %.2f× | %.2f× |\n", kind, when, p,
					all(results.Ours), all(results.Leccion), all(results.Careful), all(results.Plain), pooled[results.Ours][i]/bestPooled, pooled[results.Ours][i]/pooled[results.Plain][i])
				switch c := per[results.Careful][p]; {
				case p != "p50":
				case !loaded:
					r.addGoal(fmt.Sprintf("Idle repair p50 of a %s no slower than the careful lesson's", kind), judge(o, c),
						fmt.Sprintf("%s against %s ms", o, c))
				case pl.med > 0:
					r.addGoal(fmt.Sprintf("Repair p50 of a %s under load within 5× of the plain client's, its own load running", kind), judge(o, pl.times(5)),
						fmt.Sprintf("%.2f× (%s against %s ms)", o.med/pl.med, o, pl))
				}
			}
		}
	}
	conv, after := 0, 0
	for _, s := range r.res.Recovery {
		if s.Loaded {
			after++
			if s.Converging {
				conv++
			}
		}
	}
	if after > 0 {
		r.f("\n%d of the %d samples under load (%.0f%%) were back before the load had all converged (the load's watch shows every Promocion Listo); the rest came back after it, behind the whole backlog.\n\n", conv, after, 100*float64(conv)/float64(after))
	}
	r.f("Inside the operators during each round's idle deletions, and from its burst of deletions under load until every child was back (controller-runtime's own metrics, means per reconcile, every reconcile of the time counted: the recreations and the status updates that follow them, and under load the load's own):\n\n")
	r.f("| candidate | when | round | reconciles | queued (ms) | in Reconcile (ms) | waiting for its own writes in the cache, per Get (ms) | waiting on the API server, per request (ms; ours only) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.present(results.Ours, results.Leccion, results.Careful) {
		for _, loaded := range []bool{false, true} {
			for _, in := range r.res.Inside {
				if in.Candidate == c && in.Loaded == loaded {
					api := "–"
					if in.Requests > 0 {
						api = fmt.Sprintf("%s (%.0f requests)", num(in.APIMs), in.Requests)
					}
					r.f("| %s | %s | %d | %.0f | %s | %s | %s (%.0f Gets) | %s |\n", short[c], whenOf(loaded), in.Round, in.Reconciles, num(in.QueuedMs), num(in.ReconcileMs), num(in.WaitMs), in.Gets, api)
				}
			}
		}
	}
	r.f("\n")
	r.f("![Recovery, ConfigMap](bench/recovery-ConfigMap.svg) ![Recovery, Deployment](bench/recovery-Deployment.svg) ![Recovery, Service](bench/recovery-Service.svg)\n\n")
}

// table writes the convergence figures of runs per candidate.
func (r *reportWriter) table(section, variant string, cands []string) {
	type row struct {
		name string
		f    func(results.Run) float64
	}
	rows := []row{
		{"Time to every Promocion Listo (s)", func(x results.Run) float64 { return x.Listo }},
		{"Time to children and status written (s)", func(x results.Run) float64 { return x.Written }},
		{"Writes per Promocion: children and status", func(x results.Run) float64 { return float64(x.Children+x.Status) / float64(x.N) }},
		{"… of which updates of children", func(x results.Run) float64 { return float64(x.ChildUpdates) / float64(x.N) }},
		{"… of which status", func(x results.Run) float64 { return float64(x.Status) / float64(x.N) }},
		{"Events per Promocion", func(x results.Run) float64 { return float64(x.Events) / float64(x.N) }},
		{"Lease writes", func(x results.Run) float64 { return float64(x.Leases) }},
		{"409 Conflicts", func(x results.Run) float64 { return float64(x.Conflicts) }},
		{"API server requests per Promocion (all clients)", func(x results.Run) float64 { return x.APIRequests / float64(x.N) }},
		{"Operator CPU (s)", func(x results.Run) float64 { return x.CPUSeconds }},
		{"Operator RSS peak (MiB)", func(x results.Run) float64 { return x.PeakMiB }},
		{"Operator RSS settled (MiB)", func(x results.Run) float64 { return x.SettledMiB }},
	}
	var heads []string
	for _, c := range cands {
		heads = append(heads, short[c])
	}
	r.f("| figure | %s | ours ÷ the lesson | ours ÷ plain |\n| --- |%s --- | --- |\n", strings.Join(heads, " | "), strings.Repeat(" --- |", len(cands)))
	for _, rw := range rows {
		figs := map[string]fig{}
		var cells []string
		for _, c := range cands {
			figs[c] = figOf(pick(r.runs(section, c, variant), rw.f))
			cells = append(cells, figs[c].String())
			if c == results.Plain && strings.HasPrefix(rw.name, "Operator") {
				cells[len(cells)-1] = "–"
			}
		}
		lesson, plain := "–", "–"
		if slices.Contains(cands, results.Leccion) || slices.Contains(cands, results.Careful) {
			l, which := betterLesson(figs)
			lesson = ratio(figs[results.Ours], l) + " (" + which + ")"
		}
		if slices.Contains(cands, results.Plain) && !strings.HasPrefix(rw.name, "Operator") {
			plain = ratio(figs[results.Ours], figs[results.Plain])
		}
		r.f("| %s | %s | %s | %s |\n", rw.name, strings.Join(cells, " | "), lesson, plain)
	}
	r.f("\n")
}

func (r *reportWriter) headline() {
	all := r.present(results.Ours, results.Leccion, results.Careful, results.Plain)
	r.f("### Convergence of %d Promociones of 1 replica, to Listo\n\n%d repeats per candidate, interleaved; each run in a fresh namespace, all %d created at once (32 at a time) by the user, the time running from the first create to the watch event that shows the last one Listo (Pods Ready on kwok's nodes), and beside it to the last one's first status (its children and status written). Writes are the candidate's own, from the API server's audit log.\n\n", r.sc.n, len(r.runs("headline", results.Ours, "")), r.sc.n)
	r.table("headline", "", all)
	med := func(c string, f func(results.Run) float64) fig { return figOf(pick(r.runs("headline", c, ""), f)) }
	listo := func(x results.Run) float64 { return x.Listo }
	writes := func(x results.Run) float64 { return float64(x.Children+x.Status+x.Events) / float64(x.N) }
	o, p := med(results.Ours, listo), med(results.Plain, listo)
	c := med(results.Careful, listo)
	r.addGoal(fmt.Sprintf("%d Promociones to Listo no later than the careful lesson", r.sc.n), judge(o, c), fmt.Sprintf("%s s against %s s; the plain client %s s", o, c, p))
	ow, cw := med(results.Ours, writes), med(results.Careful, writes)
	r.addGoal("Writes per Promocion (children, status and Events) no more than the careful lesson's plus one Event", judge(ow, fig{cw.med + 1, cw.lo + 1, cw.hi + 1, cw.n}), fmt.Sprintf("%s against %s", ow, cw))
}

func (r *reportWriter) contention() {
	r.f("### Under contention: a flooding client, and a team's users' kubectl apply\n\n")
	person := ""
	if r.note("alone-apply-person") != "" {
		person = fmt.Sprintf(", and the person **%s s**", r.note("alone-apply-person"))
	}
	r.f("%d runs of ours and of the careful lesson, and one of the plain client, shuffled, of the headline convergence while a flooding client (a ServiceAccount, %d goroutines) lists 1000 ConfigMaps of 10 KB as fast as it is answered and, a second in, two users of a team, each with `edit`, apply %d ConfigMaps each with `kubectl apply`, at the same time, each into a namespace of its own: a ServiceAccount (which API Priority and Fairness puts in `workload-low`, beside the candidates) and a person (`ana` in group `equipo-tienda`, by a client certificate: `global-default`). A candidate's *writes in flight* is the mean number of its writes that the API server held at once while the users applied (each write's time from received to answered, in the audit log, over the applies' time): the share of a saturated API server that it took from them. The same flood and applies with no candidate running took the ServiceAccount **%s s**%s.\n\n", len(r.runs("contention", results.Ours, "")), r.sc.flood, r.sc.sideApply, r.note("alone-apply"), person)
	r.f("| candidate | flags | time to Listo (s) | children and status written (s) | the ServiceAccount's kubectl apply (s) | the person's kubectl apply (s) | its writes in flight while they applied | writes per Promocion |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	levels := []string{"workload-low", "global-default", "workload-high"}
	var rows []string // of the APF table below
	for _, c := range r.present(results.Ours, results.Leccion, results.Careful, results.Plain) {
		for _, v := range r.variantsOf("contention", c) {
			limit := map[bool]string{true: "defaults", false: "`" + v + "`"}[v == ""]
			for _, x := range r.runs("contention", c, v) {
				person := "–"
				if x.SideApplyPerson > 0 {
					person = num(x.SideApplyPerson)
				}
				inFlight := "–" // not measured before issue 26's last runs
				if x.InFlight != nil {
					inFlight = num(*x.InFlight)
				}
				r.f("| %s | %s | %s | %s | %s | %s | %s | %s |\n", short[c], limit, num(x.Listo), num(x.Written), num(x.SideApply), person, inFlight, num(float64(x.Children+x.Status)/float64(x.N)))
				if x.APF == nil {
					continue
				}
				row := fmt.Sprintf("| %s | %s |", short[c], limit)
				for _, l := range levels {
					w := x.APF[l]
					row += fmt.Sprintf(" %s (%.0f) |", num(w.Ms/max(w.Requests, 1)), w.Requests)
				}
				rows = append(rows, row)
			}
		}
	}
	r.f("\n")
	r.contentionGoals()
	if len(rows) > 0 {
		r.f("Waiting in API Priority and Fairness's queues while the users applied (the API server's `apiserver_flowcontrol_request_wait_duration_seconds`): the mean wait per request in ms, and the requests each priority level let through. `workload-low` holds the candidates and the ServiceAccount user, `global-default` the person, `workload-high` the controller-manager.\n\n")
		r.f("| candidate | flags | %s |\n| --- | --- |%s\n%s\n\n", strings.Join(levels, " | "), strings.Repeat(" --- |", len(levels)), strings.Join(rows, "\n"))
	}
}

// contentionGoals: beside ours (its defaults), the person's kubectl apply no
// slower than beside the better lesson baseline, and ours at Listo no later
// than either, by their medians over the runs.
func (r *reportWriter) contentionGoals() {
	med := func(c string, f func(results.Run) float64) fig { return figOf(pick(r.runs("contention", c, ""), f)) }
	person := func(x results.Run) float64 { return x.SideApplyPerson }
	listo := func(x results.Run) float64 { return x.Listo }
	if o := med(results.Ours, person); o.n > 0 && o.med > 0 {
		c := med(results.Careful, person)
		r.addGoal("A person's kubectl apply beside ours within 1.05× of beside the careful lesson", judge(o, c.times(1.05)),
			fmt.Sprintf("%s s against %s s, over %d and %d runs", o, c, o.n, c.n))
	}
	if o := med(results.Ours, listo); o.n > 0 {
		c := med(results.Careful, listo)
		r.addGoal("Under contention, ours at Listo no later than the careful lesson", judge(o, c), fmt.Sprintf("%s s against %s s, over %d and %d runs", o, c, o.n, c.n))
	}
}

func (r *reportWriter) scale() {
	large := r.runs("large", results.Ours, "")
	var ns []int
	for _, x := range append(r.runs("scale", "", ""), large...) {
		if !slices.Contains(ns, x.N) {
			ns = append(ns, x.N)
		}
	}
	slices.Sort(ns)
	r.f("### Scale: %v Promociones, replicas 0\n\n", ns)
	r.f("Ours and the careful lesson at each N of the section, in a shuffled order each repeat")
	if len(large) > 0 {
		r.f("; ours alone at N = %d (`make bench-scale`, its runs a section apart: half an hour)", large[0].N)
	}
	r.f(". N = %d is also the headline's (replicas 1). Replicas 0: kwok's two nodes take 4000 Pods, fewer than the largest N, so Listo here needs the Deployment controller but no Pod.\n\n", r.sc.n)
	r.f("| N | candidate | repeat | Listo (s) | written (s) | writes per Promocion | RSS peak / settled (MiB) | settled: anonymous + file-backed (MiB) | CPU (s) | CPU-ms per Promocion | API requests |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.present(results.Ours, results.Leccion, results.Careful) {
		for _, x := range append(r.runs("scale", c, ""), r.runs("large", c, "")...) {
			parts := "–" // not measured before issue 26's last runs
			if x.AnonMiB > 0 {
				parts = num(x.AnonMiB) + " + " + num(x.FileMiB)
			}
			r.f("| %d | %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %.0f |\n", x.N, short[c], x.Repeat, num(x.Listo), num(x.Written), num(float64(x.Children+x.Status)/float64(x.N)),
				num(x.PeakMiB), num(x.SettledMiB), parts, num(x.CPUSeconds), num(1000*x.CPUSeconds/float64(x.N)), x.APIRequests)
		}
		// Slopes between consecutive N, of the medians over the repeats.
		var prev *results.Run
		for _, n := range ns {
			var at []results.Run
			for _, x := range append(r.runs("scale", c, ""), r.runs("large", c, "")...) {
				if x.N == n {
					at = append(at, x)
				}
			}
			if len(at) == 0 {
				continue
			}
			x := results.Run{N: n, SettledMiB: medianOf(pick(at, func(x results.Run) float64 { return x.SettledMiB })),
				CPUSeconds: medianOf(pick(at, func(x results.Run) float64 { return x.CPUSeconds })), Listo: medianOf(pick(at, func(x results.Run) float64 { return x.Listo }))}
			if prev != nil {
				dn := float64(x.N-prev.N) / 1000
				r.slope = append(r.slope, fmt.Sprintf("| %s | %d → %d | %s | %s | %s |", short[c], prev.N, x.N,
					num((x.SettledMiB-prev.SettledMiB)/dn), num(1000*(x.CPUSeconds-prev.CPUSeconds)/float64(x.N-prev.N)), num((x.Listo-prev.Listo)/dn)))
			}
			prev = &x
		}
	}
	if len(r.slope) > 0 {
		r.f("\nSlopes between consecutive N, of the medians over the repeats: settled RSS per 1000 Promociones more, CPU per Promocion more, seconds to Listo per 1000 more.\n\n| candidate | N | MiB per 1000 | CPU-ms per Promocion | s to Listo per 1000 |\n| --- | --- | --- | --- | --- |\n%s\n\n", strings.Join(r.slope, "\n"))
	}
	r.f("\n![Convergence time against N](bench/convergence.svg) ![RSS against N](bench/rss.svg)\n\n")
	r.memoryGoals()
	r.cpuToListo()
	r.profiles()
}

// memoryGoals: settled RSS per 1000 Promociones (above the candidate's own
// RSS with none, from the memory section, when measured) no more than the
// careful lesson's at each N where both ran, over the runs; and at the
// largest N, ours' peak within 80% of the memory limit that deploy.yaml
// ships, with GOMEMLIMIT set from it as in the container.
func (r *reportWriter) memoryGoals() {
	bare := func(c string) float64 {
		return figOf(pick(r.runs("memory-empty", c, ""), func(x results.Run) float64 { return x.SettledMiB })).med
	}
	// At the headline's N, its runs (replicas 1); at the others, the scale
	// section's and the large one's.
	at := func(c string, n int, f func(results.Run) float64) fig {
		var v []float64
		for _, x := range append(append(r.runs("scale", c, ""), r.runs("large", c, "")...), r.runs("headline", c, "")...) {
			if x.N == n {
				v = append(v, f(x))
			}
		}
		return figOf(v)
	}
	ns := map[int]bool{}
	for _, x := range append(append(r.runs("scale", "", ""), r.runs("large", "", "")...), r.runs("headline", "", "")...) {
		ns[x.N] = true
	}
	for _, n := range slices.Sorted(maps.Keys(ns)) {
		perThousand := func(c string) fig {
			return at(c, n, func(x results.Run) float64 { return (x.SettledMiB - bare(c)) / (float64(n) / 1000) })
		}
		o, c := perThousand(results.Ours), perThousand(results.Careful)
		if o.n == 0 || c.n == 0 {
			continue
		}
		r.addGoal(fmt.Sprintf("RSS settled per 1000 Promociones at N = %d (above its RSS with none) no more than the careful lesson's", n), judge(o, c),
			fmt.Sprintf("%s against %s MiB, over %d and %d runs", o, c, o.n, c.n))
	}
	limit, _ := strconv.ParseFloat(r.note("memory-limit"), 64)
	if large := r.runs("large", results.Ours, ""); len(large) > 0 && limit > 0 {
		last := large[0].N
		if o := figOf(pick(large, func(x results.Run) float64 { return x.PeakMiB })); o.n > 0 {
			target := 0.8 * limit / (1 << 20)
			r.addGoal(fmt.Sprintf("At N = %d, RSS peak at most 80%% of deploy.yaml's memory limit (%s of %s MiB; GOMEMLIMIT set from it, as in the container)", last, num(target), num(limit/(1<<20))),
				judge(o, fig{target, target, target, 1}), fmt.Sprintf("%s MiB, over %d runs", o, o.n))
		}
	}
}

// profiles shows the top of each heap profile taken in the scale runs.
func (r *reportWriter) profiles() {
	r.f("#### Where the memory goes: heap profiles\n\n")
	if len(r.res.Profiles) == 0 {
		r.f("Not taken in this report's run.\n\n")
		return
	}
	r.f("Taken at the end of scale runs, 5 s after the RSS settled, from the operator's own endpoint after a garbage collection (`/debug/pprof/heap?gc=1`): in-use space, so what is live, without the garbage the RSS also holds. Ours serves it as in production (`--pprof`, behind its metrics authorization); the lesson baselines only for the benchmark (`LECCION_PPROF`). The top 12 by function (what each allocated itself; a protobuf `Unmarshal` is the type it decodes), then by call site (with what it called). Each file is in `bench/` for `go tool pprof -http=: bench/<file>`.\n\n")
	for _, p := range r.res.Profiles {
		r.f("**%s, N = %d**: %s in use (`%s`).\n\n```\n%s\n```\n\n```\n%s\n```\n\n", short[p.Candidate], p.N, p.Total, p.File, strings.Join(p.Flat, "\n"), strings.Join(p.Cum, "\n"))
	}
}

// cpuToListo shows where the machine's CPU went in the scale runs, from the
// start to the last Listo: what a curve that is not flat is made of.
func (r *reportWriter) cpuToListo() {
	procs := append(slices.Clone(clusterComponents), "operator", "harness")
	var rows []string
	var ours []results.Run
	for _, c := range r.present(results.Ours, results.Leccion, results.Careful) {
		for _, x := range append(r.runs("scale", c, ""), r.runs("large", c, "")...) {
			if x.CPUToListo == nil {
				continue
			}
			if c == results.Ours {
				ours = append(ours, x)
			}
			total, cells := x.TotalCPUToListo(), make([]string, len(procs))
			for i, p := range procs {
				cells[i] = num(x.CPUToListo[p])
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s | %.0f%% |", x.N, short[c], num(x.Listo), strings.Join(cells, " | "), num(total), 100*total/(float64(r.res.Cores)*x.Listo)))
		}
	}
	if len(rows) == 0 || r.res.Cores == 0 {
		r.f("Where the CPU went, by process, was not measured in this report's run.\n\n")
		return
	}
	r.f("Where the CPU went, from the start to the last Listo, in CPU-seconds by process (the harness is this test: its watches and creates); the last column is their sum over the %d cores' time to Listo.\n\n", r.res.Cores)
	r.f("| N | candidate | Listo (s) | %s | sum | of the cores' time |\n|%s\n%s\n\n", strings.Join(procs, " | "), strings.Repeat(" --- |", len(procs)+5), strings.Join(rows, "\n"))
	if len(ours) < 2 {
		return
	}
	first, last := ours[0], ours[len(ours)-1]
	var per []string
	for _, p := range append(procs, "sum") {
		ms := func(x results.Run) float64 {
			if p == "sum" {
				return 1000 * x.TotalCPUToListo() / float64(x.N)
			}
			return 1000 * x.CPUToListo[p] / float64(x.N)
		}
		per = append(per, fmt.Sprintf("%s %s → %s", p, num(ms(first)), num(ms(last))))
	}
	r.f("CPU-ms per Promocion from N = %d to N = %d, with ours: %s.\n\n", first.N, last.N, strings.Join(per, "; "))
}

func (r *reportWriter) memory() {
	r.f("### Memory beside unrelated objects\n\n")
	r.f("Each operator started fresh with no Promocion, %d times each, shuffled; RSS read 5 s after its workers started: first on the bare cluster, then with %d unrelated 10 KB ConfigMaps in it. *ours, unscoped* is ours with no cache scope (the ablation's variant sin-alcance; not shipped).\n\n", len(r.runs("memory-empty", results.Ours, "")), r.sc.unrelated)
	r.f("| candidate | RSS settled, bare (MiB) | RSS settled, with the ConfigMaps (MiB) | peak with them (MiB) |\n| --- | --- | --- | --- |\n")
	figs := map[string]fig{}
	for _, c := range []struct{ key, variant, name string }{{results.Ours, "", "ours"}, {results.Ours, "unscoped", "ours, unscoped"}, {results.Leccion, "", "lesson"}, {results.Careful, "", "lesson, careful"}} {
		settled := func(x results.Run) float64 { return x.SettledMiB }
		with := figOf(pick(r.runs("memory-unrelated", c.key, c.variant), settled))
		figs[c.name] = with
		r.f("| %s | %s | %s | %s |\n", c.name, figOf(pick(r.runs("memory-empty", c.key, c.variant), settled)), with,
			figOf(pick(r.runs("memory-unrelated", c.key, c.variant), func(x results.Run) float64 { return x.PeakMiB })))
	}
	r.f("\n")
	l, which := betterLesson(map[string]fig{results.Leccion: figs["lesson"], results.Careful: figs["lesson, careful"]})
	r.addGoal(fmt.Sprintf("Memory with %d unrelated objects far below (under half) the better lesson baseline's", r.sc.unrelated), met(figs["ours"].hi < l.lo/2),
		fmt.Sprintf("%s against %s MiB (%s)", figs["ours"], l, which))
}

func (r *reportWriter) steadyAndFailover() {
	var resync, idle, dur string
	if v := r.note("steady"); v != "" {
		parts := strings.SplitN(v, "/", 3)
		resync, idle, dur = parts[0], parts[1], parts[2]
	}
	r.f("### Steady state and failover\n\nA fresh operator over %d converged Promociones sent **%s** writes resyncing them and **%s** while idle for %s.\n\n", r.sc.n, resync, idle, dur)
	r.addGoal("Zero writes in the steady state", met(resync == "0" && idle == "0"), resync+" and "+idle)
	if len(r.res.Failover) == 0 {
		r.f("Failover: not measured in this report's run.\n\n")
		return
	}
	r.f("Failover: two replicas with `--leader-elect` (lease 6 s, renew deadline 4 s, retry 1 s) over those %d Promociones; the leader is stopped and the time runs until the other's first reconcile (its `controller_runtime_reconcile_total`), %d times each, in a random order of warm-up on and off.\n\n", r.sc.n, r.sc.failovers)
	r.f("| leader stopped by | `--leader-elect-warmup` | to the new leader's first reconcile (ms) |\n| --- | --- | --- |\n")
	for _, kill := range []string{"SIGKILL", "SIGTERM"} {
		for _, warm := range []bool{false, true} {
			var ms []float64
			for _, f := range r.res.Failover {
				if f.Kill == kill && f.Warmup == warm {
					ms = append(ms, f.Ms)
				}
			}
			r.f("| %s | %t | %s |\n", kill, warm, figOf(ms))
		}
	}
	r.f("\n")
}

func (r *reportWriter) fsync() {
	r.f("### The headline with etcd syncing to disk\n\nEverything above ran with etcd's `--unsafe-no-fsync`; this is the headline once per candidate with the cluster restored and etcd started without it (`%s`).\n\n", r.note("fsync-etcd"))
	r.table("fsync", "", []string{results.Ours, results.Leccion, results.Careful, results.Plain})
}

// addGoal records a goal, its figure and its verdict (judge, or met).
func (r *reportWriter) addGoal(what, verdict, figure string) {
	r.goal = append(r.goal, fmt.Sprintf("| %s | %s | %s |", what, figure, verdict))
}

// judge is the verdict on ours against a target, lower the better: met only
// when ours' median is at or better than the target's; when not, but either
// median lies within the other's range, the repeats show no difference.
func judge(ours, target fig) string {
	switch {
	case ours.n == 0 || target.n == 0:
		return "**not measured**"
	case ours.med <= target.med:
		return "met"
	case ours.overlaps(target):
		return "level, no difference shown"
	}
	return "**missed**"
}

// met is the verdict on a goal that is a yes or a no.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// times is f with its median and range multiplied by k: a target k times a figure.
func (x fig) times(k float64) fig { return fig{med: k * x.med, lo: k * x.lo, hi: k * x.hi, n: x.n} }

func (r *reportWriter) goals() {
	r.f("### Goals\n\n| goal | measured | verdict |\n| --- | --- | --- |\n%s\n\n", strings.Join(r.goal, "\n"))
}

func (r *reportWriter) cluster() {
	r.f("### The cluster\n\nEvery component on the same machine as the candidates and the benchmark; their command lines, read from /proc during the run:\n\n")
	for _, c := range r.res.Cluster {
		r.f("- **%s**: `%s`\n", c.Name, c.Args)
	}
	r.f("\n")
}
