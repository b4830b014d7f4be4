package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The tests run Helm and kubectl (for hack/installer.sh's kustomize), both
// built by the repository's scripts into the tools cache.
var root, chart, helm, kubectl string

func TestMain(m *testing.M) {
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	var err error
	if root, err = filepath.Abs("../.."); err != nil {
		return err
	}
	chart = filepath.Join(root, chartDir)
	out := func(script string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "hack", script))
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		return strings.TrimSpace(string(b)), err
	}
	if helm, err = out("helm.sh"); err != nil {
		return fmt.Errorf("building helm: %w", err)
	}
	bins, err := out("k8s-binaries.sh")
	if err != nil {
		return fmt.Errorf("building kubectl: %w", err)
	}
	kubectl = filepath.Join(bins, "kubectl")
	return nil
}

// The chart on disk is what manifiestos/ makes: a change to manifiestos/
// without make chart fails here.
func TestChartIsGenerated(t *testing.T) {
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if stale := compare(chart, files); len(stale) > 0 {
		t.Fatalf("%s differs from what manifiestos/ makes: %s (run make chart)", chartDir, strings.Join(stale, ", "))
	}
}

func TestChartLint(t *testing.T) {
	run(t, nil, helm, "lint", "--strict", "--namespace", operatorNamespace, chart)
}

// operatorNamespace is where a team installs the operator, as docs/helm.md
// says and dist/install.yaml does.
const operatorNamespace = "operador-promociones-system"

// The chart refuses the namespace default, with a message that says why and
// what to run instead; any other is the operator's.
func TestChartRefusesDefault(t *testing.T) {
	_, err := try(nil, helm, "template", "operador-promociones", chart, "--namespace", "default")
	if err == nil {
		t.Fatal("helm template accepted the namespace default")
	}
	for _, want := range []string{"must not run in the namespace default", "every editor of default", "-n operador-promociones-system --create-namespace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// defaultImage is deploy.yaml's, which is also the Makefile's IMG.
const defaultImage = "registry.iximiuz.com/tienda/operador-promociones:v1"

// With its defaults, and with the values that hack/installer.sh also knows
// (NAMESPACES, WEB_IMAGE, the image by digest), the chart makes the same
// objects as dist/install.yaml, object by object. Helm's keep annotation on
// the API's objects is the only difference allowed.
func TestChartRendersInstallYAML(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name   string
		values string
		image  string
		env    []string
	}{
		{name: "defaults", image: defaultImage},
		{name: "namespaces", values: "namespaces: [tienda, outlet]", image: defaultImage, env: []string{"NAMESPACES=tienda,outlet"}},
		{name: "web image", values: "webImage: registry.example.com/web/nginx:1.29", image: defaultImage, env: []string{"WEB_IMAGE=registry.example.com/web/nginx:1.29"}},
		{name: "digest", values: "image: {repository: registry.example.com/operador, digest: " + digest + "}", image: "registry.example.com/operador@" + digest},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := objects(t, run(t, c.env, filepath.Join(root, "hack", "installer.sh"), c.image, "-", kubectl))
			got := objects(t, render(t, c.values))
			// The namespace itself: Helm's --create-namespace makes it, as
			// docs/helm.md says, and a chart does not own its release's.
			if want["Namespace /"+operatorNamespace] == nil {
				t.Errorf("dist/install.yaml makes no namespace %s", operatorNamespace)
			}
			delete(want, "Namespace /"+operatorNamespace)
			for _, objs := range []map[string]map[string]any{want, got} {
				if d := objs["Deployment "+operatorNamespace+"/operador-promociones"]; d != nil {
					c, err := operatorContainer(d)
					if err != nil {
						t.Fatal(err)
					}
					c["args"] = lastWins(c["args"].([]any))
				}
			}
			for _, o := range got {
				if a, _ := o["metadata"].(map[string]any)["annotations"].(map[string]any); a != nil {
					delete(a, keep)
					if len(a) == 0 {
						delete(o["metadata"].(map[string]any), "annotations")
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if g, ok := got[k]; !ok {
					t.Errorf("%s: in dist/install.yaml, not in the chart", k)
				} else if !reflect.DeepEqual(g, want[k]) {
					gy, _ := yaml.Marshal(g)
					wy, _ := yaml.Marshal(want[k])
					t.Errorf("%s differs:\nthe chart:\n%s\ndist/install.yaml:\n%s", k, gy, wy)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(got)) {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: in the chart, not in dist/install.yaml", k)
				}
			}
		})
	}
}

// The values that dist/install.yaml has no switch for.
func TestChartValues(t *testing.T) {
	deployment := func(objs map[string]map[string]any) map[string]any {
		t.Helper()
		d := objs["Deployment "+operatorNamespace+"/operador-promociones"]
		if d == nil {
			t.Fatal("no Deployment")
		}
		return d
	}
	container := func(objs map[string]map[string]any) map[string]any {
		t.Helper()
		c, err := operatorContainer(deployment(objs))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	args := func(objs map[string]map[string]any) []any { return container(objs)["args"].([]any) }
	has := func(objs map[string]map[string]any, key string) bool { _, ok := objs[key]; return ok }
	defaults := objects(t, render(t, ""))

	t.Run("metrics off", func(t *testing.T) {
		objs := objects(t, render(t, "metrics: {enabled: false}"))
		if !slices.Contains(args(objs), "--metrics-bind-address=0") {
			t.Errorf("args %v, want --metrics-bind-address=0", args(objs))
		}
		for k := range defaults {
			if strings.Contains(k, "metrics") && has(objs, k) {
				t.Errorf("%s rendered with metrics off", k)
			}
		}
		if !has(defaults, "Service "+operatorNamespace+"/operador-promociones-metrics") {
			t.Error("no metrics Service with the defaults")
		}
	})
	t.Run("metrics certificate", func(t *testing.T) {
		objs := objects(t, render(t, "metrics: {enabled: true, certSecret: metrics-tls}"))
		if !slices.Contains(args(objs), "--metrics-cert-dir="+certDir) {
			t.Errorf("args %v, want --metrics-cert-dir", args(objs))
		}
		pod := get(deployment(objs), "spec", "template", "spec").(map[string]any)
		want := []any{map[string]any{"name": "metrics-certs", "secret": map[string]any{"secretName": "metrics-tls"}}}
		if !reflect.DeepEqual(pod["volumes"], want) {
			t.Errorf("volumes %v, want %v", pod["volumes"], want)
		}
		mounts := []any{map[string]any{"name": "metrics-certs", "mountPath": certDir, "readOnly": true}}
		if got := container(objs)["volumeMounts"]; !reflect.DeepEqual(got, mounts) {
			t.Errorf("volumeMounts %v, want %v", got, mounts)
		}
		if c := container(defaults); c["volumeMounts"] != nil || slices.ContainsFunc(args(defaults), func(a any) bool { return strings.HasPrefix(a.(string), "--metrics-cert-dir") }) {
			t.Error("a certificate mounted with the defaults")
		}
	})
	t.Run("monitoring", func(t *testing.T) {
		objs := objects(t, render(t, "metrics: {enabled: true, serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}\nnetworkPolicy: {enabled: true}"))
		for file, key := range map[string]string{
			"servicemonitor.yaml": "ServiceMonitor " + operatorNamespace + "/operador-promociones",
			"prometheusrule.yaml": "PrometheusRule " + operatorNamespace + "/operador-promociones",
			"networkpolicy.yaml":  "NetworkPolicy " + operatorNamespace + "/operador-promociones-metrics",
		} {
			data, err := os.ReadFile(filepath.Join(root, "manifiestos", "monitoring", file))
			if err != nil {
				t.Fatal(err)
			}
			want := objects(t, string(data))[key]
			if want == nil || !reflect.DeepEqual(objs[key], want) {
				t.Errorf("%s: rendered %v, want manifiestos/monitoring/%s's", key, objs[key], file)
			}
			if has(defaults, key) {
				t.Errorf("%s rendered with the defaults", key)
			}
		}
	})
	t.Run("scheduling, replicas and resources", func(t *testing.T) {
		objs := objects(t, render(t, `replicas: 3
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: operadores, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [sistema]}]}]}}}
resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}
imagePullSecrets: []
podDisruptionBudget: {enabled: false}`))
		d := deployment(objs)
		pod := get(d, "spec", "template", "spec").(map[string]any)
		for k, want := range map[string]string{
			"nodeSelector": `{"kubernetes.io/os":"linux"}`,
			"tolerations":  `[{"effect":"NoSchedule","key":"dedicated","operator":"Equal","value":"operadores"}]`,
			"affinity":     `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["sistema"]}]}]}}}`,
		} {
			if got, _ := yaml.Marshal(pod[k]); !sameJSON(t, got, want) {
				t.Errorf("%s: %s, want %s", k, got, want)
			}
		}
		if got := get(d, "spec", "replicas"); got != float64(3) {
			t.Errorf("replicas %v, want 3", got)
		}
		if got, _ := yaml.Marshal(container(objs)["resources"]); !sameJSON(t, got, `{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"512Mi"}}`) {
			t.Errorf("resources %s", got)
		}
		if pod["imagePullSecrets"] != nil {
			t.Errorf("imagePullSecrets %v, want none", pod["imagePullSecrets"])
		}
		if has(objs, "PodDisruptionBudget "+operatorNamespace+"/operador-promociones") {
			t.Error("a PodDisruptionBudget while disabled")
		}
	})
	t.Run("release namespace", func(t *testing.T) {
		out := run(t, nil, helm, "template", "operador-promociones", chart, "--namespace", "operadores", "--skip-tests")
		for k, o := range objects(t, out) {
			if ns, _ := get(o, "metadata", "namespace").(string); ns != "" && ns != "operadores" {
				t.Errorf("%s in %s, want operadores", k, ns)
			}
			for _, s := range asList(o["subjects"]) {
				if s := s.(map[string]any); s["kind"] == "ServiceAccount" && s["namespace"] != "operadores" {
					t.Errorf("%s binds the ServiceAccount of %v, want operadores", k, s["namespace"])
				}
			}
		}
	})
}

// A wrong value fails helm template (and so helm install) with a message that
// names it, before anything reaches the cluster.
func TestChartRejectsBadValues(t *testing.T) {
	for _, c := range []struct{ values, message string }{
		{"replicas: -1", "replicas"},
		{"replicas: dos", "replicas"},
		{"replica: 2", "replica"},
		{"image: {repository: registry.example.com/operador, digest: latest}", "digest"},
		{"image: {repository: Registry.Example.com/Operador}", "repository"},
		{"namespaces: [Tienda]", "namespaces"},
		{"webImage: 'nginx; rm -rf /'", "webImage"},
		{"resources: {limits: null}", "limits"},
		{"resources: {limits: {memory: null}}", "memory"},
		{"resources: {limits: {memory: mucho}}", "memory"},
		{"metrics: {enabled: false, serviceMonitor: {enabled: true}}", "enabled"},
		{"podDisruptionBudget: {enabled: true, minAvailable: uno}", "minAvailable"},
		{"metrics: {enabled: true, certSecret: Mi_Secreto}", "certSecret"},
	} {
		t.Run(c.values, func(t *testing.T) {
			_, err := try(nil, helm, "template", "operador-promociones", chart, "--values", valuesFile(t, c.values))
			if err == nil {
				t.Fatalf("helm template accepted %s", c.values)
			}
			if out := err.Error(); !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, c.message) {
				t.Errorf("for %s, the message does not name %s:\n%s", c.values, c.message, out)
			}
		})
	}
}

// ----- helpers -----

// lastWins folds a flag given twice into its first place, with its last
// value, as the operator's flag parsing reads it: hack/installer.sh adds
// --web-image=X after deploy.yaml's, where the chart sets it in place.
// --namespace is the one flag that repeats.
func lastWins(args []any) []any {
	var out []any
	at := map[string]int{}
	for _, a := range args {
		name, _, _ := strings.Cut(a.(string), "=")
		if i, seen := at[name]; seen && name != "--namespace" {
			out[i] = a
			continue
		}
		at[name] = len(out)
		out = append(out, a)
	}
	return out
}

// render is helm template of the chart with the defaults and values (YAML),
// CRDs included and the test hook left out, in the operator's namespace.
func render(t *testing.T, values string) string {
	t.Helper()
	args := []string{"template", "operador-promociones", chart, "--namespace", operatorNamespace, "--include-crds", "--skip-tests"}
	if values != "" {
		args = append(args, "--values", valuesFile(t, values))
	}
	return run(t, nil, helm, args...)
}

func valuesFile(t *testing.T, values string) string {
	t.Helper()
	// Not in t.TempDir(), whose name is the test's: helm splits --values at commas.
	f, err := os.CreateTemp("", "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(values + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// objects parses a YAML stream into its objects, by "Kind namespace/name".
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range splitDocuments([]byte(stream)) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if o == nil {
			continue
		}
		ns, _ := get(o, "metadata", "namespace").(string)
		key := fmt.Sprintf("%s %s/%s", o["kind"], ns, get(o, "metadata", "name"))
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = o
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

func sameJSON(t *testing.T, gotYAML []byte, wantJSON string) bool {
	t.Helper()
	var got, want any
	if err := yaml.Unmarshal(gotYAML, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(wantJSON), &want); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(got, want)
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := try(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

// try runs a command and returns its stdout; its error carries its stderr.
func try(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}
