package framework

// The ablation's variants of the operator (BENCHMARKS.md, the ablation): each
// takes one mechanism beyond the careful lesson out, by a flag or by a few
// lines changed (BuildVariant). The benchmarks run them for the figures
// (e2e/bench, TestAblation), the chaos suite for the failures that some of
// them exist to prevent (e2e/chaos, TestAblationChaos).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Variant is the operator with one mechanism taken out.
type Variant struct {
	Key       string // its candidate key, and its name in the table
	Mechanism string // what is taken out
	Code      []Span // the mechanism's code, whose lines the table counts
	Lines     int    // or its lines, where it has no declaration of its own
	Args      []string
	Edits     []Edit
	// Guards are the chaos scenarios (TestChaos's subtests) that name the
	// failure the mechanism exists to prevent: hack/ablation-chaos.sh runs
	// them with the variant as the operator.
	Guards []string
	// ChaosOnly: a mechanism for a failure only, which changes none of the
	// benchmark's figures (or is off in its runs); the benchmark does not run it.
	ChaosOnly bool
}

// AblationVariant is the variant of that key, or false.
func AblationVariant(key string) (Variant, bool) {
	i := slices.IndexFunc(AblationVariants, func(v Variant) bool { return v.Key == key })
	if i < 0 {
		return Variant{}, false
	}
	return AblationVariants[i], true
}

// Span is code of the product: a file and, in it, the declarations named
// (functions, methods as Type.Method, types, and const or var blocks by a
// name they declare), doc comments included; all of the file if none.
type Span struct {
	File  string
	Decls []string
}

var AblationVariants = []Variant{
	{Key: "sin-carril", Mechanism: "the repair lane and its 32 workers, and the pace that sets the lane's routine limit (controller-runtime's priority queue as it is, 16 workers)",
		Code: []Span{{File: "queue.go"}},
		Edits: []Edit{
			{File: "reconciler.go", From: "MaxConcurrentReconciles: routine + r.RepairWorkers,", To: "MaxConcurrentReconciles: routine,"},
			{File: "reconciler.go", From: `		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			lane := newRepairLane(priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
				o.RateLimiter, o.Log = rl, mgr.GetLogger().WithValues("controller", name)
			}), routine)
			if r.Pace != nil {
				r.Pace.follow(lane)
			}
			return lane
		},
`, To: ""},
			{File: "main.go", From: "if w.adaptive {", To: "if false && w.adaptive {"},
		}},
	{Key: "sin-prioridad", Mechanism: "repairs first: the lesson's plain Owns, which queues a deleted child's Promocion behind the rest, and also for the children the garbage collector deletes after it",
		Code: []Span{{File: "reconciler.go", Decls: []string{"repairPriority", "repairFirst", "repairFirst.Delete", "atPriority", "atPriority.Add"}}},
		Edits: []Edit{{File: "reconciler.go",
			From: "owns := repairFirst{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Promocion{}, handler.OnlyControllerOwner()), mgr.GetCache()}",
			To:   "owns := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &Promocion{}, handler.OnlyControllerOwner())"}}},
	{Key: "sin-ritmo", Mechanism: "the pace: routine reconciles cut while the API server answers slowly",
		Code: []Span{{File: "queue.go", Decls: []string{"pace", "paceSpans", "writeKind", "writeKind.observe", "newPace", "pace.observe", "writeKindOf", "pace.follow", "pace.timed", "pace.send"}}},
		Args: []string{"--adaptive-concurrency=false"}},
	{Key: "trabajadores-1", Mechanism: "15 of the 16 routine workers", Args: []string{"--max-concurrent-reconciles=1"}},
	{Key: "trabajadores-2", Mechanism: "14 of the 16 routine workers", Args: []string{"--max-concurrent-reconciles=2"}},
	{Key: "trabajadores-4", Mechanism: "12 of the 16 routine workers", Args: []string{"--max-concurrent-reconciles=4"}},
	{Key: "sin-seguimiento", Mechanism: "the tracking of its own status writes: the lesson's plain For, which also queues a reconcile for each of them",
		Code:   []Span{{File: "status_writes.go"}},
		Guards: []string{"frozen-leader", "stale-restart", "lagging-watches", "unobserved", "lagging-own-status"},
		Edits: []Edit{
			{File: "reconciler.go", From: "For(&Promocion{}, builder.WithPredicates(r.own.promocionChanged()))", To: "For(&Promocion{})"},
			{File: "reconciler.go", From: `"sigs.k8s.io/controller-runtime/pkg/builder"`, To: `_ "sigs.k8s.io/controller-runtime/pkg/builder"`},
			{File: "reconciler.go", From: "if r.own.behind(promo) || r.cacheMoved(ctx, promo) {", To: "if false {"},
			{File: "reconciler.go", From: "\tr.own.writing(promo)\n", To: ""},
			{File: "reconciler.go", From: "later := r.own.wrote(promo, err == nil)", To: "later := false"},
		}},
	{Key: "sin-lectura", Mechanism: "the live read of the Promocion, past the cache, before a repair or a take-back",
		Code:   []Span{{File: "reconciler.go", Decls: []string{"PromocionReconciler.stillLive"}}, {File: "children.go", Decls: []string{"needsLiveOwner"}}},
		Guards: []string{"same-name", "namespace-deletion", "lagging-watches", "lagging-owners"},
		Edits:  []Edit{{File: "reconciler.go", From: "if needsLiveOwner(child, promo) {", To: "if false && needsLiveOwner(child, promo) {"}}},
	{Key: "sin-cerca", Mechanism: "the write fence: no write from a replica not sure to hold the Lease",
		Code:   []Span{{File: "fence.go"}},
		Guards: []string{"frozen-leader"},
		// Only with --leader-elect, which the benchmark's runs do not pass:
		// there it is nil and costs nothing, so no figure could tell.
		ChaosOnly: true,
		Edits:     []Edit{{File: "fence.go", From: "func (f *leaderFence) fence(cfg *rest.Config) *rest.Config {\n\tif f == nil {", To: "func (f *leaderFence) fence(cfg *rest.Config) *rest.Config {\n\tif true {"}}},
	{Key: "sin-compartir", Mechanism: "the cache transform's interning and shared parts",
		Code: []Span{{File: "cache_transform.go", Decls: []string{"sharedParts", "sharedParts.deployment", "sharedParts.service", "interner", "knownStrings", "interner.of", "interner.inMap", "internMeta", "shared", "shared.of"}}},
		Edits: []Edit{
			{File: "cache_transform.go", From: "\t\t\tparts.deployment(o)\n", To: "\t\t\t_ = &parts\n"},
			{File: "cache_transform.go", From: "\t\t\tparts.service(o)\n", To: ""},
			{File: "cache_transform.go", From: "\t\t\tin := &interner{}\n\t\t\tinternMeta(&o.ObjectMeta, in)\n\t\t\to.Data = in.inMap(o.Data)\n", To: ""},
		}},
	{Key: "sin-alcance", Mechanism: "the cache's scope: only the children the operator labelled, not every ConfigMap, Deployment and Service of the cluster",
		Code:  []Span{{File: "cache_scope.go", Decls: []string{"cacheByObject"}}},
		Edits: []Edit{{File: "cache_scope.go", From: "\treturn scoped\n", To: "\treturn nil\n"}}},
	{Key: "eventos-del-manager", Mechanism: "its own events broadcaster, sending one Event at a time: the manager's recorder instead",
		Code:  []Span{{File: "main.go", Decls: []string{"startEvents", "oneAtATime"}}},
		Edits: []Edit{{File: "main.go", From: "Recorder:  recorder,", To: "Recorder:  mgr.GetEventRecorder(operatorName),"}}},
	{Key: "sin-tope", Mechanism: "the 30 s cap on the wait between retries of a failing Promocion (controller-runtime's default goes to 1000 s)",
		Code:      []Span{{File: "reconciler.go", Decls: []string{"maxRetryDelay", "retries"}}},
		Edits:     []Edit{{File: "reconciler.go", From: "\t\tRateLimiter:             retries(),\n", To: ""}},
		Guards:    []string{"fuzzing"},
		ChaosOnly: true},
	{Key: "sin-leer-lo-escrito", Mechanism: "controller-runtime's read-your-writes consistency (experimental), on by the operator's choice",
		Lines: 1,
		Edits: []Edit{{File: "flags.go", From: "EnableReadYourWritesConsistency: new(len(c.namespaces) <= 1),", To: "EnableReadYourWritesConsistency: new(false),"}}},
}

// LinesOf counts the lines of the code spans name, from the product's source
// at root.
func LinesOf(t testing.TB, root string, spans []Span) int {
	t.Helper()
	n := 0
	for _, s := range spans {
		path := filepath.Join(root, s.File)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Decls == nil {
			n += strings.Count(string(src), "\n")
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, d := range f.Decls {
			name := declName(d)
			if !slices.Contains(s.Decls, name) {
				continue
			}
			found[name] = true
			from := d.Pos()
			if doc := declDoc(d); doc != nil {
				from = doc.Pos()
			}
			n += fset.Position(d.End()).Line - fset.Position(from).Line + 1
		}
		for _, want := range s.Decls {
			if !found[want] {
				t.Fatalf("%s declares no %s: change the ablation's spans with the code", s.File, want)
			}
		}
	}
	return n
}

// declName is a declaration's name as spans give it: a function's, a
// method's as Type.Method, the first of a type, const or var block.
func declName(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return d.Name.Name
		}
		typ := d.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if idx, ok := typ.(*ast.IndexExpr); ok { // a generic type's method
			typ = idx.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			return id.Name + "." + d.Name.Name
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				return s.Name.Name
			case *ast.ValueSpec:
				return s.Names[0].Name
			}
		}
	}
	return ""
}

func declDoc(d ast.Decl) *ast.CommentGroup {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Doc
	case *ast.GenDecl:
		return d.Doc
	}
	return nil
}
