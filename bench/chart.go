package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// style gives each contender the same color and marker in every panel;
// tblimit's lines are solid and thick, the others thinner.
var styles = map[string]struct {
	c     color.RGBA
	shape draw.GlyphDrawer
	thick bool
	dash  bool
}{
	"tblimit/embedded":             {color.RGBA{0xd6, 0x27, 0x28, 0xff}, draw.CircleGlyph{}, true, false},
	"tblimit/embedded+coalesce":    {color.RGBA{0xe3, 0x77, 0xc2, 0xff}, draw.PyramidGlyph{}, true, false},
	"tblimit/embedded+leases":      {color.RGBA{0xbc, 0xbd, 0x22, 0xff}, draw.RingGlyph{}, true, false},
	"raw engine":                   {color.RGBA{0xff, 0x7f, 0x0e, 0xff}, draw.TriangleGlyph{}, false, true},
	"tblimit/tigerbeetle":          {color.RGBA{0x94, 0x67, 0xbd, 0xff}, draw.CircleGlyph{}, true, false},
	"tblimit/tigerbeetle+coalesce": {color.RGBA{0x17, 0xbe, 0xcf, 0xff}, draw.PyramidGlyph{}, true, false},
	"raw client/tigerbeetle":       {color.RGBA{0x8c, 0x56, 0x4b, 0xff}, draw.TriangleGlyph{}, false, true},
	"redis_rate":                   {color.RGBA{0x1f, 0x77, 0xb4, 0xff}, draw.SquareGlyph{}, false, false},
	"x/time/rate":                  {color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, draw.CrossGlyph{}, false, false},
}

// chart draws decisions/s by callers, one line per contender, one panel per
// workload, on log scales, and writes it as a PNG.
func (rep *report) chart(path string) error {
	workloads := rep.Meta.Config.Workloads
	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.Results {
		if r.ran() && r.DecisionsPerSec > 0 {
			lo, hi = min(lo, r.DecisionsPerSec), max(hi, r.DecisionsPerSec)
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	var plots []*plot.Plot
	for _, wl := range workloads {
		p := plot.New()
		p.Title.Text = map[string]string{
			"hot":  fmt.Sprintf("one hot user (limit %s per window)", thousands(float64(rep.Meta.Config.HotLimit))),
			"zipf": fmt.Sprintf("%s users, Zipf s=%.2g (limit %s each)", thousands(float64(rep.Meta.Config.Users)), rep.Meta.Config.ZipfS, thousands(float64(rep.Meta.Config.ZipfLimit))),
		}[wl]
		p.Title.TextStyle.Font.Size = vg.Points(13)
		p.X.Label.Text = "concurrent callers"
		p.Y.Label.Text = "decisions per second"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		var ticks []plot.Tick
		for _, c := range rep.Meta.Config.Callers {
			ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Y.Tick.Marker = decadeTicks{}
		p.X.Min, p.X.Max = float64(minInt(rep.Meta.Config.Callers))/1.5, float64(maxInt(rep.Meta.Config.Callers))*1.5
		// A decade of room below the lowest line for the legend.
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))-1), math.Pow(10, math.Ceil(math.Log10(hi)))
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = false, true
		p.Legend.TextStyle.Font.Size = vg.Points(10)
		for _, name := range rep.order {
			var xys plotter.XYs
			for _, r := range rep.Results {
				if r.Workload == wl && r.Contender == name && r.ran() && r.DecisionsPerSec > 0 {
					xys = append(xys, plotter.XY{X: float64(r.Callers), Y: r.DecisionsPerSec})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			st, ok := styles[name]
			if !ok {
				st.c, st.shape = color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, draw.BoxGlyph{}
			}
			line.Color, points.Color = st.c, st.c
			line.Width = vg.Points(1.5)
			if st.thick {
				line.Width = vg.Points(3)
			}
			if st.dash {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			points.Shape, points.Radius = st.shape, vg.Points(3.5)
			p.Add(line, points)
			p.Legend.Add(name, line, points)
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil
	}
	const panelW, panelH = 520, 480
	img := vgimg.New(vg.Points(float64(panelW*len(plots))), vg.Points(panelH))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(20), PadY: vg.Points(10),
		PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// decadeTicks labels powers of ten as 1k, 10k, 100k, 1M, 10M.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		if v >= lo*0.999 && v <= hi*1.001 {
			ts = append(ts, plot.Tick{Value: v, Label: si(v)})
		}
		for m := 2.0; m < 10; m++ {
			if w := m * v; w > lo && w < hi {
				ts = append(ts, plot.Tick{Value: w})
			}
		}
	}
	return ts
}

func si(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func minInt(s []int) int {
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

func maxInt(s []int) int {
	m := s[0]
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
