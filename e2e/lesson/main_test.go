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

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{Name: "lesson", Port: 17443, RealNode: true})
}

// lesson is the framework's Lesson, with this suite's steps as its methods.
type lesson struct{ *framework.Lesson }

func newLesson(t *testing.T) *lesson { return &lesson{framework.NewLesson(t)} }
