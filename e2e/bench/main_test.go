// Package bench is the benchmark (`make bench`, and a small run in `make
// test`): this operator beside the lesson's and a plain client, on a cluster
// of its own. BENCHMARKS.md says how each figure is taken.
package bench

import (
	"fmt"
	"os"
	"testing"

	"operador-promociones/e2e/framework"
)

// suite is this suite's cluster and builds, which TestMain fills.
var suite framework.Suite

func TestMain(m *testing.M) {
	// make bench-report: the report and plots again from the data, with no cluster.
	if file := os.Getenv("BENCH_RESULTS"); file != "" {
		if err := benchReport(file, os.Getenv("BENCH_REPORT")); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	framework.Main(m, framework.Options{Name: "bench", Port: 17843, Leccion: true}, &suite)
}
