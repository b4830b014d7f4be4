// Package lesson walks through the lesson, Steps 1 to 9, on a real cluster
// with a real node, with the real operator binary, its image and kubectl, and
// checks what the lesson tells the learner to look at; and beside it what a
// team runs: production, operating, security, the quick start, upgrades.
// Run it with `make e2e`; -v shows each step as it happens.
package lesson

import (
	"testing"

	"operador-promociones/e2e/framework"
)

// suite is this suite's cluster and builds, which TestMain fills.
var suite framework.Suite

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{Name: "lesson", Port: 17443, RealNode: true}, &suite)
}

// lesson is the framework's Harness, with this suite's steps as its methods.
type lesson struct{ *framework.Harness }

func newLesson(t *testing.T) *lesson { return &lesson{framework.NewHarness(t, &suite)} }

// newLessonOnRealNodes is newLesson for a test whose pods must run for real:
// it fails, rather than skips, where the real nodes are not (CLUSTER_NODE=none).
func newLessonOnRealNodes(t *testing.T) *lesson {
	t.Helper()
	if !suite.RealNode {
		t.Fatal("this test needs the real nodes: they run unless CLUSTER_NODE=none")
	}
	return newLesson(t)
}
