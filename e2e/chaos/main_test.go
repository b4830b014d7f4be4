// Package chaos is the reliability suite (`make chaos`, and a short run in
// `make test`): faults injected on purpose into the operator, its connection
// to the API server and the cluster, each case ending with the oracle
// (e2e/framework/oracle.go) and a quiet period. RELIABILITY.md explains it.
package chaos

import (
	"math/rand/v2"
	"testing"

	"operador-promociones/e2e/framework"
)

// suite is this suite's cluster and builds, which TestMain fills.
var suite framework.Suite

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{Name: "chaos", Port: 17743, Unfenced: true}, &suite)
}

// lesson is the framework's Harness, with this suite's faults as its methods.
type lesson struct {
	*framework.Harness
	never map[string]*neverWatch // by scenario namespace, from its birth
	// seeds draws the seeds of what a scenario chooses at random beside its
	// own choices (the proxy's 429s and watch cuts): from the scenario's
	// source, so that CHAOS_SEED replays them too.
	seeds *rand.Rand
	// conflictsAfter: the scenario names its need for one refused write per
	// object in the quiet period (quiet).
	conflictsAfter bool
	// short: the converge under way sets up or checks a step on the way,
	// with the short quiet period (shortQuiet), not the scenario's end.
	short bool
}

func newLesson(t testing.TB, seeds *rand.Rand) *lesson {
	return &lesson{Harness: framework.NewHarness(t, &suite), never: map[string]*neverWatch{}, seeds: seeds}
}
