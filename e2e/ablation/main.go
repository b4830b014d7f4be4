// Command ablation prints, for hack/ablation-chaos.sh, each ablation variant
// that guards against a failure, a line each: its key, then the chaos
// scenarios that name that failure, as a -run pattern of TestChaos.
package main

import (
	"fmt"
	"strings"

	"operador-promociones/e2e/framework"
)

func main() {
	for _, v := range framework.AblationVariants {
		if len(v.Guards) > 0 {
			fmt.Printf("%s TestChaos/^(%s)$\n", v.Key, strings.Join(v.Guards, "|"))
		}
	}
}
