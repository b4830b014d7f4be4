package chaos

// Mutants: deliberately broken operators, each a one-line change of the
// product's source that a plausible bug would make. Each is built with `go
// build -overlay` (the source on disk untouched, and no test-only hook in the
// product that a learner would copy), run through the checks that every chaos
// scenario ends with (settle: the oracle, what must never be seen, the quiet
// period; then a restart on the settled world, which must cost no write), and
// must be caught by the check that claims it. A mutant that survives fails
// the suite, and so does one whose line is no longer in the source (the
// table must follow the code). The operator as it ships goes through the same
// run first, and must pass it: the run catches the mutants, not everything.
// The deposed leader that writes (the fence switched off by an overlay) is the frozen-leader
// scenario's own mutant, run in every size of this suite.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"operador-promociones/e2e/framework"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type mutant struct {
	name       string
	file       string // of the product, at the repository's root
	from, to   string // the line changed
	caughtBy   string // the check that claims it
	finding    string // a regular expression its failure matches
	binary     string
	killedWith string // the failure that caught it, for the report
}

var mutants = []*mutant{
	{name: "no escaping of the banner", file: "children.go",
		from: `b := html.EscapeString(p.Spec.Banner)`, to: `b := html.UnescapeString(p.Spec.Banner)`,
		caughtBy: "the oracle", finding: `the page shows the banner escaped`},
	{name: "no controller reference", file: "reconciler.go",
		from: `if err := controllerutil.SetControllerReference(promo, child, r.Scheme); err != nil {`, to: `if err := error(nil); err != nil {`,
		caughtBy: "the oracle", finding: `a controller ownerReference to its Promocion`},
	{name: "status written on every pass", file: "reconciler.go",
		from: `if equality.Semantic.DeepEqual(promo.Status, status) {`, to: `if equality.Semantic.DeepEqual(promo.Status, status) && false {`,
		caughtBy: "the restart on a settled world", finding: `wrote .* after a restart on a settled world`},
	{name: "a wrong selector (every shop's pods)", file: "children.go",
		from: `return map[string]string{LabelPromocion: p.Name}`, to: `return map[string]string{"app.kubernetes.io/name": "promocion"}`,
		caughtBy: "the oracle", finding: `a selector of the Promocion's label alone`},
	{name: "Listo before the pods are ready", file: "status.go",
		from: `if deploymentCaughtUp(d, desired) {`, to: `if d.Status.ObservedGeneration >= 0 {`,
		caughtBy: "what must never be seen", finding: `says Listo with \d+ of \d+ replicas ready`},
	{name: "children made under a new name", file: "children.go",
		from: `func ConfigMapName(p *Promocion) string { return p.Name + "-html" }`, to: `func ConfigMapName(p *Promocion) string { return p.Name + "-pagina" }`,
		caughtBy: "the oracle", finding: `ConfigMap promo-\d-html is missing`},
}

// build makes the mutant's binary in dir.
func (m *mutant) build(t *testing.T, dir string) {
	root := suite.Root
	src, err := os.ReadFile(filepath.Join(root, m.file))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(src), m.from) != 1 {
		t.Fatalf("mutant %q: %s no longer holds the line %q once: change the mutant with the code", m.name, m.file, m.from)
	}
	slug := regexp.MustCompile(`\W+`).ReplaceAllString(m.name, "-")
	changed := filepath.Join(dir, slug+"-"+m.file)
	if err := os.WriteFile(changed, []byte(strings.Replace(string(src), m.from, m.to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, m.file): changed}})
	overlayFile := filepath.Join(dir, slug+".json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	m.binary = filepath.Join(dir, slug)
	build := exec.Command("go", "build", "-overlay", overlayFile, "-o", m.binary, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mutant %q: %v\n%s", m.name, err, out)
	}
}

// mutantRun is one small scenario with the operator binary: three Promociones
// of two replicas, one with HTML in its banner, settled; then the operator
// restarted on the settled world. It returns what the checks found.
func mutantRun(l *lesson, binary, who string, run int) []string {
	ns, untouched := l.scenarioNamespace(fmt.Sprintf("caos-mutante-%d", run))
	kubeconfig := l.ServiceAccountKubeconfig("caos-mutante")
	o := l.Start(framework.Launch{Who: who, Binary: binary, Kubeconfig: kubeconfig, Args: []string{"--namespace=" + ns}})
	ctx := context.Background()
	for i := range 3 {
		p := framework.Promocion(ns, i, 2)
		if i == 0 {
			if err := unstructured.SetNestedField(p.Object, `<b>Rebajas</b> & "más"`, "spec", "banner"); err != nil {
				l.T.Fatal(err)
			}
		}
		if err := l.C.Create(ctx, p); err != nil {
			l.T.Fatal(err)
		}
	}
	var r result
	failures := l.settleWithin(20*time.Second, ns, untouched, time.Now(), &r)
	o.Stop(l.T)
	if len(failures) == 0 {
		failures = append(failures, l.restartCostsNothing(ns, binary, kubeconfig, who)...)
	}
	return failures
}

// restartCostsNothing starts binary again on ns, settled, and returns its
// writes there: an unchanged Promocion costs zero writes, also to an
// operator that has just started and reconciles every one of them.
func (l *lesson) restartCostsNothing(ns, binary, kubeconfig, who string) []string {
	from := time.Now()
	o := l.Start(framework.Launch{Who: who + "-again", Binary: binary, Kubeconfig: kubeconfig, Args: []string{"--namespace=" + ns}})
	l.WaitForLog(o, "the restarted operator runs", `Starting workers`)
	l.WaitMetric(o, "controller_runtime_reconcile_total", 3) // each Promocion reconciled again
	l.WaitIdle(o)
	o.Stop(l.T)
	l.AuditFlushed()
	ws := l.Audit(from, func(w framework.Request) bool {
		return w.UserAgent == "operador-promociones" && strings.Contains(w.URI, "/namespaces/"+ns+"/")
	})
	if len(ws) > 0 {
		return []string{fmt.Sprintf("the operator wrote %d times in %s after a restart on a settled world:\n%s", len(ws), ns, framework.First(ws, 5))}
	}
	return nil
}

// TestMutants: every mutant caught by the check that claims it, and the
// operator as it ships by none.
func TestMutants(t *testing.T) {
	dir := t.TempDir()
	for _, m := range mutants {
		m.build(t, dir)
	}
	l := newLesson(t, rand.New(rand.NewPCG(1, 1))) // the mutants' run injects no random fault
	l.Identity("caos-mutante")
	if failures := mutantRun(l, suite.Operator, "as-it-ships", 0); len(failures) > 0 {
		t.Fatalf("the operator as it ships fails the mutants' run, which then proves nothing:\n%s", strings.Join(failures, "\n"))
	}
	var table strings.Builder
	table.WriteString("| mutant (one line of the source changed) | claimed by | killed by |\n| --- | --- | --- |\n")
	for i, m := range mutants {
		failures := mutantRun(l, m.binary, "mutante", i+1)
		finding := regexp.MustCompile(m.finding)
		for _, f := range failures {
			for _, line := range strings.Split(f, "\n") {
				if m.killedWith == "" && finding.MatchString(line) {
					m.killedWith = line
					if r := []rune(line); len(r) > 200 {
						m.killedWith = string(r[:200]) + "…"
					}
				}
			}
		}
		switch {
		case len(failures) == 0:
			t.Errorf("mutant %q survived: every check passed", m.name)
		case m.killedWith == "":
			t.Errorf("mutant %q was caught, but not by %s (want a failure matching %q):\n%s", m.name, m.caughtBy, m.finding, strings.Join(failures, "\n"))
		default:
			l.Logf("mutant %q killed by %s: %s", m.name, m.caughtBy, m.killedWith)
		}
		fmt.Fprintf(&table, "| %s: `%s` → `%s` | %s | %s |\n", m.name, m.from, m.to, m.caughtBy, tableCell(strings.TrimSpace(m.killedWith)))
	}
	fmt.Fprintf(&table, "| a deposed leader writing: the leader fence off (the ablation's variant sin-cerca, built with go build -overlay) | the frozen-leader scenario | its writes after the handover, from the audit log (see that scenario's row, and the mutant pairs) |\n")
	fmt.Println(table.String())
	if out := os.Getenv("CHAOS_OUT"); out != "" && !t.Failed() {
		if err := framework.Splice(out, "mutants", table.String()); err != nil {
			t.Error(err)
		}
	}
}
