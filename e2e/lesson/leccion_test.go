package lesson

import (
	"fmt"
	"operador-promociones/e2e/framework"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLeccion walks the lesson's Steps 1 to 9 as a learner types them, on
// this cluster, and writes what each command printed into a transcript. The
// transcript must match docs/leccion.md but for names, ages, times and
// addresses (mask): a change that alters what a learner sees fails here, and
// LECCION_WRITE=1 (make leccion) writes the file again from the run.
func TestLeccion(t *testing.T) {
	l := newLessonOnRealNodes(t)
	tr := &transcript{l: l}
	manifest := func(f string) string { return filepath.Join(l.Root, "manifiestos", f) }
	l.removeOperatorAtCleanup()
	t.Cleanup(func() { _, _ = l.TryKubectl("delete", "promocion", framework.LessonName, "--ignore-not-found") })

	tr.step("1", "go run .", "The operator on this machine, with the admin's kubeconfig, and the lesson's Promocion. Of its start-up log, the lines the lesson shows; the last says `\"worker count\": 48` where the lesson's says 1, because this operator reconciles up to 16 Promociones at once, fewer while the API server is slow, and keeps 32 more workers for repairs (`--max-concurrent-reconciles`, `--max-concurrent-repairs`):")
	l.Kubectl("apply", "-f", manifest("ejemplos/rebajas-verano.yaml"))
	tr.command("kubectl apply -f manifiestos/ejemplos/rebajas-verano.yaml", "promocion.tienda.example.com/rebajas-verano created")
	o := l.Start(framework.Launch{Who: "go-run"})
	l.WaitForLog(o, "the operator starts its workers", `Starting workers`)
	var startup []string
	for _, p := range []string{`operador-promociones arrancando`, `kind source: \*main.Promocion`, `kind source: \*v1.ConfigMap`,
		`kind source: \*v1.Deployment`, `kind source: \*v1.Service`, `Starting Controller`, `Starting workers`} {
		startup = append(startup, o.FirstLine(p))
	}
	tr.command("go run .", strings.Join(startup, "\n"))

	tr.step("2", "The status", "")
	l.waitForRow("3", "3", "Listo")
	l.Eventually("3 pods Running and Ready", func() error { return l.podsReady("tienda.example.com/promocion="+framework.LessonName, 3) })
	tr.show("get", "promociones")
	tr.show("get", "all", "-l", "tienda.example.com/promocion="+framework.LessonName)

	tr.step("3", "Break it, with the logs in front of you", "")
	tr.show("delete", "deployment", framework.LessonName)
	l.Eventually("the Deployment is back", func() error { _, err := l.TryKubectl("get", "deployment", framework.LessonName); return err })
	l.WaitForLog(o, "the operator logs the Deployment it made again", `Created Deployment rebajas-verano`)
	tr.command("# in the operator's log", o.FirstLine(`Created Deployment rebajas-verano"`))
	l.waitForRow("3", "3", "Listo")
	tr.show("get", "deployment", framework.LessonName)
	o.Stop(t)

	tr.step("4", "Now, inside the cluster", "`make image` and `make push` stand for the lesson's `docker build` and `docker push`; the registry asks for credentials, and the kubelet gets them from `registry-credentials`:")
	l.pushOperatorImage()
	tr.command("make image && make push", "cluster: pushed "+operatorImage)
	l.createPullSecret("default")
	tr.command("kubectl create secret docker-registry registry-credentials --docker-server=registry.iximiuz.com --docker-username=tienda --docker-password=...",
		"secret/registry-credentials created")
	tr.show("apply", "-f", manifest("sa.yaml"))
	tr.show("apply", "-f", manifest("deploy.yaml"))
	l.Eventually("2 operator Pods Ready", func() error { return l.podsReady("app=operador-promociones", 2) })
	tr.show("get", "pods", "-l", "app=operador-promociones", "-o", "wide")

	tr.step("5", "The operator is no longer an administrator", "The first refusal in its log (with leader election, the first thing refused is its Lease):")
	refused := `is forbidden: User \\"` + regexp.QuoteMeta(framework.OperatorUser) + `\\"`
	var firstRefusal string
	l.Eventually("the API server refuses the operator", func() error {
		logs, err := l.TryKubectl("logs", "-l", "app=operador-promociones", "--tail=-1")
		firstRefusal = framework.FirstMatch(logs, refused)
		if firstRefusal == "" {
			return fmt.Errorf("no refusal yet in:\n%s", logs)
		}
		return err
	})
	tr.command("kubectl logs -l app=operador-promociones --tail=30", firstRefusal)

	tr.step("6", "The permissions, and only the necessary ones", "The children are there already, made in Step 1 with the same labels and owner: the leader starts its workers and has nothing to write.")
	tr.show("apply", "-f", manifest("rbac.yaml"))
	var recovery string
	l.Eventually("a replica leads, and starts its workers", func() error {
		logs, err := l.TryKubectl("logs", "-l", "app=operador-promociones", "--tail=-1")
		recovery = framework.FirstMatch(logs, `Starting workers`)
		if recovery == "" {
			return fmt.Errorf("no workers yet: %w", err)
		}
		return nil
	})
	tr.command("kubectl logs -l app=operador-promociones -f", recovery)
	for _, args := range [][]string{
		{"list", "promociones.tienda.example.com"},
		{"update", "promociones.tienda.example.com", "--subresource=status"},
		{"delete", "secrets"},
	} {
		args = append(append([]string{"auth", "can-i"}, args...), "--as=system:serviceaccount:default:operador-promociones", "-A")
		out, _ := l.TryKubectl(args...) // can-i exits 1 for no
		tr.command("kubectl "+strings.Join(args, " "), out)
	}

	tr.step("7", "Try to break it (again, but for real)", "")
	tr.show(append([]string{"delete"}, "deployment", framework.LessonName)...)
	tr.show(append([]string{"delete"}, "service", framework.LessonName)...)
	tr.show(append([]string{"delete"}, "configmap", framework.LessonName+"-html")...)
	l.Eventually("all three back", func() error {
		_, err := l.TryKubectl(append([]string{"get"}, framework.ChildRefs(framework.LessonName)...)...)
		return err
	})
	l.waitForRow("3", "3", "Listo")
	tr.show(append([]string{"get"}, framework.ChildRefs(framework.LessonName)...)...)

	tr.step("8", "The Custom Resource is the source of truth", "Of `kubectl get promociones -w`, the first row and each change of FASE:")
	watch := l.watchPromociones()
	tr.show("patch", "promocion", framework.LessonName, "--type=merge", "-p", `{"spec":{"replicas":5}}`)
	l.waitForRow("5", "5", "Listo")
	time.Sleep(time.Second) // the watch's last event
	tr.command("kubectl get promociones -w", faseChanges(watch()))

	tr.step("9", "Delete everything with a single line", "The garbage collector removes the children and their pods; the operator's last reconciliation finds the Promocion gone (the lesson's NotFound) and says so, once.")
	tr.show("delete", "promocion", framework.LessonName)
	l.Eventually("the garbage collector removes the children and the pods", func() error {
		out, err := l.TryKubectl("get", "all,configmap", "-l", "tienda.example.com/promocion="+framework.LessonName, "-o", "name")
		if err != nil || out != "" {
			return fmt.Errorf("still there: %s %w", out, err)
		}
		return nil
	})
	tr.show("get", "all")
	tr.show("get", "configmap")
	var gone string
	l.Eventually("the operator's last reconciliation", func() error {
		logs, _ := l.TryKubectl("logs", "-l", "app=operador-promociones", "--tail=-1")
		if gone = framework.FirstMatch(logs, `Promocion gone`); gone == "" {
			return fmt.Errorf("not in the logs yet")
		}
		return nil
	})
	tr.command("kubectl logs -l app=operador-promociones", gone)

	tr.check(filepath.Join(l.Root, "docs", "leccion.md"))
}

// transcript is the lesson's commands and what they printed, in Markdown.
type transcript struct {
	l *lesson
	b strings.Builder
}

func (tr *transcript) step(n, title, prose string) {
	fmt.Fprintf(&tr.b, "\n## Step %s: %s\n\n", n, title)
	if prose != "" {
		fmt.Fprintf(&tr.b, "%s\n\n", prose)
	}
}

// command records a command as typed, and what it printed.
func (tr *transcript) command(typed, out string) {
	fmt.Fprintf(&tr.b, "```console\n$ %s\n", typed)
	if out = strings.TrimRight(out, "\n"); out != "" {
		fmt.Fprintf(&tr.b, "%s\n", out)
	}
	tr.b.WriteString("```\n\n")
}

// show runs kubectl and records it, with the repository's paths as a learner
// types them.
func (tr *transcript) show(args ...string) {
	tr.l.T.Helper()
	out := tr.l.Kubectl(args...)
	typed := strings.ReplaceAll("kubectl "+strings.Join(quoted(args), " "), tr.l.Root+"/", "")
	tr.command(typed, out)
}

func quoted(args []string) []string {
	var q []string
	for _, a := range args {
		if strings.ContainsAny(a, `{}" `) {
			a = "'" + a + "'"
		}
		q = append(q, a)
	}
	return q
}

const transcriptHead = `# The lesson, as it ran

The lesson's Steps 1 to 9, typed as a learner types them, on the local cluster
(` + "`make dev`" + `'s, with its two real nodes), and what each command printed. The
e2e test TestLeccion writes it (` + "`make leccion`" + `), and ` + "`make test`" + ` fails when a run no
longer prints the same, but for names, ages, times and addresses, which differ on
every run. Where the lesson shows a long log, the lines it talks about are shown.
Where this cluster prints something else than the lesson's, the README's map from the
lesson to the code says why (48 workers, the Lease refused first, the Step 9 line).
`

// check compares the transcript with the committed one, masked; with
// LECCION_WRITE=1 it writes it instead.
func (tr *transcript) check(path string) {
	t := tr.l.T
	t.Helper()
	got := transcriptHead + tr.b.String()
	if os.Getenv("LECCION_WRITE") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		tr.l.Logf("wrote %s", path)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, run := strings.Split(mask(string(b)), "\n"), strings.Split(mask(got), "\n")
	for i := range max(len(want), len(run)) {
		w, g := line(want, i), line(run, i)
		if w != g {
			t.Fatalf("docs/leccion.md no longer matches what the lesson prints here, from line %d (masked):\n  committed: %s\n  this run:  %s\nIf the change is meant, write it again: make leccion\nThis run:\n%s", i+1, w, g, got)
		}
	}
	tr.l.Logf("docs/leccion.md matches this run, line for line, names, ages and times masked")
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(nothing)"
}

// mask replaces what differs on every run: times, ages and durations, the
// random parts of names, UIDs, digests, addresses and counts of log lines.
func mask(s string) string {
	for _, r := range []struct{ re, with string }{
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`, "<time>"},
		{`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`, "<uid>"},
		{`sha256:[0-9a-f]{64}`, "<digest>"},
		{`\b\d+\.\d+\.\d+\.\d+(:\d+)?\b`, "<address>"},
		{`(operador-promociones|rebajas-verano)-[a-z0-9]{8,10}-[a-z0-9]{5}\b`, "$1-<pod>"},
		{`(operador-promociones|rebajas-verano)-[a-z0-9]{8,10}\b`, "$1-<replicaset>"},
		{`\b(\d+(\.\d+)?(ms|s|m|h|d))+\b`, "<age>"},
		{`"GOMEMLIMIT": \d+`, `"GOMEMLIMIT": <bytes>`},
		// The caller's folder is the checkout's name for a go build, the
		// module's for the image's -trimpath one.
		{`[\w.-]+/(\w+\.go):\d+`, "$1:<line>"},
		{`\bnode-0[12]\b`, "<node>"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	// Columns realign when a masked field changes width.
	return regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ")
}

// faseChanges keeps, of kubectl get promociones -w's output, the header, the
// first row, and each row whose FASE differs from the row before: how many
// rows a rollout prints in between depends on timing.
func faseChanges(out string) string {
	var kept []string
	last := ""
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if i == 0 || len(f) < 5 {
			kept = append(kept, l)
			continue
		}
		if f[4] != last {
			kept = append(kept, l)
			last = f[4]
		}
	}
	return strings.Join(kept, "\n")
}

// podsReady reports an error unless n pods of the selector are Running and
// Ready, and none is on its way out.
func (l *lesson) podsReady(selector string, n int) error {
	out := l.Kubectl("get", "pods", "-l", selector, "-o",
		`jsonpath={range .items[*]}{.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
	ready := 0
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) != 2 || f[0] != "Running" || f[1] != "True" {
			return fmt.Errorf("pods:\n%s", out)
		}
		ready++
	}
	if ready != n {
		return fmt.Errorf("pods:\n%s", out)
	}
	return nil
}
