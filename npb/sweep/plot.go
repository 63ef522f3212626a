package sweep

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Chart size: fits a page or a slide at full width.
const (
	chartWidth  = 16 * vg.Centimeter
	chartHeight = 11 * vg.Centimeter
)

// Formats are the file formats every chart is written in.
var Formats = []string{"png", "svg"}

// Plot draws, for each (kernel, class) of rows, a Mop/s-versus-np chart and a speedup-versus-np chart with one
// series per label (see Group; the speedup's base is chosen by Bases), each as PNG and SVG in dir, named KERNEL_CLASS_mops.png,
// KERNEL_CLASS_speedup.svg and so on. It returns the files written.
func Plot(rows []Row, dir string) ([]string, error) {
	type kc struct{ kernel, class string }
	var order []kc
	groups := map[kc][]Series{}
	for _, s := range Group(rows) {
		k := kc{s.Kernel, s.Class}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	var files []string
	for _, k := range order {
		ss := groups[k]
		base := filepath.Join(dir, fileSafe(k.kernel)+"_"+fileSafe(k.class))
		mops, err := chart(ss, fmt.Sprintf("NPB %s class %s: Mop/s total", k.kernel, k.class), "Mop/s total",
			func(i int) []Point { return ss[i].Mops() }, false)
		if err != nil {
			return files, err
		}
		bases := Bases(ss)
		speed, err := chart(ss, fmt.Sprintf("NPB %s class %s: speedup", k.kernel, k.class), "speedup",
			func(i int) []Point { return ss[i].SpeedupFrom(bases[i]) }, true)
		if err != nil {
			return files, err
		}
		for _, c := range []struct {
			p    *plot.Plot
			name string
		}{{mops, base + "_mops"}, {speed, base + "_speedup"}} {
			for _, f := range Formats {
				path := c.name + "." + f
				if err := c.p.Save(chartWidth, chartHeight, path); err != nil {
					return files, fmt.Errorf("writing %s: %w", path, err)
				}
				files = append(files, path)
			}
		}
	}
	return files, nil
}

// chart draws the series' points (value(i) for series i) against np on a log axis; ideal adds the line y = np.
func chart(ss []Series, title, ylabel string, value func(i int) []Point, ideal bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "processes (np)"
	p.Y.Label.Text = ylabel
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(14), -vg.Points(6) // clear of the axis line and the top edge
	p.Legend.Padding = vg.Points(2)
	p.Add(plotter.NewGrid())

	var nps []int
	for _, s := range ss {
		for _, r := range s.Rows {
			if !slices.Contains(nps, r.NP) {
				nps = append(nps, r.NP)
			}
		}
	}
	slices.Sort(nps)
	if ideal && len(nps) > 0 {
		xy := make(plotter.XYs, len(nps))
		for i, n := range nps {
			xy[i] = plotter.XY{X: float64(n), Y: float64(n)}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 140}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("ideal", l)
	}
	for i, s := range ss {
		pts := value(i)
		xy := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			xy[j] = plotter.XY{X: float64(pt.NP), Y: pt.Value}
		}
		l, sc, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		sc.Shape = plotutil.Shape(i)
		sc.Radius = vg.Points(3)
		p.Add(l, sc)
		label := s.Label
		if label == "" {
			label = "(no label)"
		}
		p.Legend.Add(label, l, sc)
	}
	// np grows by powers of two: a log axis spaces them evenly, ticks only where there are points.
	if len(nps) > 0 {
		p.X.Scale = plot.LogScale{}
		ticks := make(plot.ConstantTicks, len(nps))
		for i, n := range nps {
			ticks[i] = plot.Tick{Value: float64(n), Label: strconv.Itoa(n)}
		}
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = float64(nps[0])/1.25, float64(nps[len(nps)-1])*1.25
	}
	// The legend sits in the top left corner: leave it a band above the data, one line per entry.
	p.Y.Min = 0
	band := min(0.6, 0.075*float64(len(ss)+1))
	p.Y.Max /= 1 - band
	return p, nil
}

// fileSafe keeps letters and digits of s for a file name.
func fileSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
	if s == "" {
		return "_"
	}
	return s
}
