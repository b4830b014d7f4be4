// Command plots draws the benchmark's pictures from its results:
//
//	go run . DIR
//
// reads DIR/bench-results.json (written by e2e/bench's TestBench, in the format
// of e2e/bench/results) and writes into DIR
// recovery-ConfigMap.svg, recovery-Deployment.svg, recovery-Service.svg (the
// distribution of recovery times per candidate, idle and under load),
// convergence.svg (time to Listo against N) and rss.svg (memory against N).
package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"operador-promociones/e2e/bench/results"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	candidates = []string{results.Ours, results.Leccion, results.Careful, results.Plain}
	names      = results.CandidateNames
	colors     = map[string]color.Color{results.Ours: plotutil.Color(0), results.Leccion: plotutil.Color(1), results.Careful: plotutil.Color(3), results.Plain: plotutil.Color(2)}
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: plots DIR")
		os.Exit(2)
	}
	if err := drawAll(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "plots:", err)
		os.Exit(1)
	}
}

func drawAll(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "bench-results.json"))
	if err != nil {
		return err
	}
	var res results.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	var kinds []string // every child's, as the run measured them
	for _, s := range res.Recovery {
		if !slices.Contains(kinds, s.Kind) {
			kinds = append(kinds, s.Kind)
		}
	}
	for _, kind := range kinds {
		if err := recovery(&res, kind, filepath.Join(dir, "recovery-"+kind+".svg")); err != nil {
			return err
		}
	}
	if err := againstN(&res, "Time to Listo against N (replicas 0)", "seconds", filepath.Join(dir, "convergence.svg"),
		func(listo, written, _, _ float64) (float64, float64) { return listo, written }, "to Listo", "children and status written"); err != nil {
		return err
	}
	return againstN(&res, "Operator memory against N", "RSS (MiB)", filepath.Join(dir, "rss.svg"),
		func(_, _, peak, settled float64) (float64, float64) { return peak, settled }, "peak", "settled")
}

// recovery draws each candidate's distribution of recovery times of kind as
// an empirical CDF: solid idle, dashed under load.
func recovery(res *results.Results, kind, file string) error {
	p := plot.New()
	p.Title.Text = "Recovery of a deleted " + kind
	p.X.Label.Text = "ms from the delete to the new object on a watch"
	p.Y.Label.Text = "fraction of deletions"
	p.Legend.Top, p.Legend.Left = false, false
	hi := 0.0
	for _, c := range candidates {
		for _, loaded := range []bool{false, true} {
			var ms []float64
			for _, s := range res.Recovery {
				if s.Candidate == c && s.Kind == kind && s.Loaded == loaded {
					ms = append(ms, s.Ms)
				}
			}
			if len(ms) == 0 {
				continue
			}
			slices.Sort(ms)
			hi = max(hi, ms[min(len(ms)-1, len(ms)*99/100)])
			pts := make(plotter.XYs, len(ms))
			for i, v := range ms {
				pts[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(ms))}
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			l.Color, l.Width = colors[c], vg.Points(1.5)
			label := names[c] + ", idle"
			if loaded {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				label = names[c] + ", under load"
			}
			p.Add(l)
			p.Legend.Add(label, l)
		}
	}
	p.X.Min, p.X.Max = 0, hi // the slowest 1% would flatten the rest
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}

// againstN draws two figures of the scale runs (and the large ones) against
// N per operator, every repeat a point.
func againstN(res *results.Results, title, ylabel, file string, pick func(listo, written, peak, settled float64) (float64, float64), first, second string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Promociones (N)"
	p.Y.Label.Text = ylabel
	p.Legend.Top, p.Legend.Left = true, true
	for _, c := range candidates {
		var a, b plotter.XYs
		for _, r := range res.Runs {
			if (r.Section == "scale" || r.Section == "large") && r.Candidate == c {
				x, y := pick(r.Listo, r.Written, r.PeakMiB, r.SettledMiB)
				a, b = append(a, plotter.XY{X: float64(r.N), Y: x}), append(b, plotter.XY{X: float64(r.N), Y: y})
			}
		}
		if len(a) == 0 {
			continue
		}
		// The repeats at each N, in order of N: the line goes through each.
		for _, pts := range []plotter.XYs{a, b} {
			slices.SortStableFunc(pts, func(p, q plotter.XY) int { return cmp.Compare(p.X, q.X) })
		}
		for i, pts := range []plotter.XYs{a, b} {
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = colors[c], colors[c]
			label := names[c] + ", " + first
			if i == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				s.Shape = draw.CircleGlyph{}
				label = names[c] + ", " + second
			}
			p.Add(l, s)
			p.Legend.Add(label, l, s)
		}
	}
	p.Y.Min = 0
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}
