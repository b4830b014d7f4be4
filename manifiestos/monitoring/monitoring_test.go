// Package monitoring holds only this test: the alerting rules of
// prometheusrule.yaml checked and unit-tested with promtool, which
// hack/check-tools.sh builds.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type rules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// alertCase is the story of one alert on synthetic series, one sample a
// minute: it must fire at firing, and not at any of quiet.
type alertCase struct {
	series map[string]string // series -> values, in promtool's notation
	firing string
	quiet  []string
}

const job = `job="operador-promociones-metrics"`

var cases = map[string]alertCase{
	"OperadorPromocionesDown": { // up, then down for 10 minutes, then up again
		series: map[string]string{`up{` + job + `,instance="a"}`: "1x2 0x10 1x5"},
		firing: "10m", quiet: []string{"2m", "6m", "16m"},
	},
	"OperadorPromocionesNoLeader": { // the leader steps down and nobody takes over for 20 minutes
		series: map[string]string{
			`up{` + job + `,instance="a"}`:                                            "1x30",
			`leader_election_master_status{name="operador-promociones",instance="a"}`: "1x5 0x20 1x5",
		},
		firing: "15m", quiet: []string{"3m", "8m", "29m"},
	},
	"OperadorPromocionesReconcileErrors": { // one error a second for half an hour, then none
		series: map[string]string{`controller_runtime_reconcile_errors_total{controller="promocion",instance="a"}`: "0x5 60+60x30 1860x20"},
		firing: "25m", quiet: []string{"5m", "12m", "50m"},
	},
	"PromocionNotListo": { // one Promocion waits, past 15 minutes, and gets there
		series: map[string]string{`promociones_not_listo_oldest_seconds{` + job + `,instance="a"}`: "0x5 600 1000 1000 0x5"},
		firing: "7m", quiet: []string{"5m", "6m", "12m"},
	},
	"OperadorPromocionesWorkqueueBackingUp": { // 150 waiting for half an hour, then drained
		series: map[string]string{`workqueue_depth{name="promocion",instance="a"}`: "0x5 150x30 0x10"},
		firing: "30m", quiet: []string{"3m", "15m", "40m"},
	},
}

func TestAlertingRules(t *testing.T) {
	promtool := filepath.Join(tool(t), "promtool")
	manifest, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       rules          `json:"spec"`
	}
	// Strict: a field this test does not know would be lost on the way to promtool.
	if err := yaml.UnmarshalStrict(manifest, &pr); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("check", "rules", "rules.yaml")

	// promtool's unit tests: each alert fires at its time, with its labels and
	// annotations, and is quiet before and after.
	type expAlert struct {
		Labels      map[string]string `json:"exp_labels"`
		Annotations map[string]string `json:"exp_annotations"`
	}
	type alertTest struct {
		EvalTime  string     `json:"eval_time"`
		Alertname string     `json:"alertname"`
		ExpAlerts []expAlert `json:"exp_alerts"`
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	type unitTest struct {
		Name       string      `json:"name"`
		Interval   string      `json:"interval"`
		Series     []series    `json:"input_series"`
		AlertTests []alertTest `json:"alert_rule_test"`
	}
	var tests []unitTest
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if r.Annotations["summary"] == "" || r.Annotations["runbook"] == "" {
				t.Errorf("alert %s lacks a summary or a runbook line", r.Alert)
			}
			c, ok := cases[r.Alert]
			if !ok {
				t.Errorf("alert %s has no test here", r.Alert)
				continue
			}
			u := unitTest{Name: r.Alert, Interval: "1m"}
			for s, v := range c.series {
				u.Series = append(u.Series, series{s, v})
			}
			u.AlertTests = append(u.AlertTests, alertTest{EvalTime: c.firing, Alertname: r.Alert, ExpAlerts: []expAlert{{r.Labels, r.Annotations}}})
			for _, q := range c.quiet {
				u.AlertTests = append(u.AlertTests, alertTest{EvalTime: q, Alertname: r.Alert, ExpAlerts: []expAlert{}})
			}
			tests = append(tests, u)
		}
	}
	if len(tests) != len(cases) {
		t.Errorf("%d alerts tested, %d stories here: an alert was removed or renamed", len(tests), len(cases))
	}
	file, err := yaml.Marshal(map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	run("test", "rules", "tests.yaml")
}

// tool is the folder of promtool, built by hack/check-tools.sh if missing.
func tool(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "..", "hack", "check-tools.sh")).Output()
	if err != nil {
		t.Fatalf("hack/check-tools.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}
