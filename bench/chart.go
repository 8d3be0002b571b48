package main

import (
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

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
	"tblimit/tigerbeetle+leases":   {color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, draw.RingGlyph{}, true, false},
	"raw client/tigerbeetle":       {color.RGBA{0x8c, 0x56, 0x4b, 0xff}, draw.TriangleGlyph{}, false, true},
	"tblimit/modelled":             {color.RGBA{0x6a, 0x3d, 0x9a, 0xff}, draw.CircleGlyph{}, true, true},
	"tblimit/modelled+coalesce":    {color.RGBA{0x1f, 0x9e, 0x89, 0xff}, draw.PyramidGlyph{}, true, true},
	"tblimit/modelled+leases":      {color.RGBA{0xb1, 0x59, 0x28, 0xff}, draw.RingGlyph{}, true, true},
	"raw client/modelled":          {color.RGBA{0x33, 0x33, 0x33, 0xff}, draw.TriangleGlyph{}, false, true},
	"redis_rate":                   {color.RGBA{0x1f, 0x77, 0xb4, 0xff}, draw.SquareGlyph{}, false, false},
	"x/time/rate":                  {color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, draw.CrossGlyph{}, false, false},
	"tblimit/embedded 2 limits":    {color.RGBA{0xd6, 0x27, 0x28, 0xff}, draw.BoxGlyph{}, false, true},
	"tblimit/modelled 2 limits":    {color.RGBA{0x6a, 0x3d, 0x9a, 0xff}, draw.BoxGlyph{}, false, true},
	"redis_rate 2 limits":          {color.RGBA{0x1f, 0x77, 0xb4, 0xff}, draw.BoxGlyph{}, false, true},
	"x/time/rate 2 limits":         {color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, draw.BoxGlyph{}, false, true},
	"tblimit serve/embedded":       {color.RGBA{0xd6, 0x27, 0x28, 0xff}, draw.PlusGlyph{}, false, true},
	"tblimit serve/modelled":       {color.RGBA{0x6a, 0x3d, 0x9a, 0xff}, draw.PlusGlyph{}, false, true},
	"tblimit serve/tigerbeetle":    {color.RGBA{0x94, 0x67, 0xbd, 0xff}, draw.PlusGlyph{}, false, true},
	"gubernator":                   {color.RGBA{0x00, 0x80, 0x80, 0xff}, draw.RingGlyph{}, false, false},
}

// chart draws decisions/s by callers, one line per contender, one panel per
// workload, on log scales, and writes it as a PNG.
func (rep *report) chart(path string) error {
	return rep.lineChart(path, "decisions per second", rep.order,
		func(r *result) float64 { return r.DecisionsPerSec }, false)
}

// transfersChart draws the transfers per admitted decision (tr/adm) of
// tblimit's modes and the raw rows by callers, one panel per workload.
func (rep *report) transfersChart(path string) error {
	var names []string
	for _, n := range rep.order {
		if strings.HasPrefix(n, "tblimit/") || strings.HasPrefix(n, "raw ") {
			names = append(names, n)
		}
	}
	return rep.lineChart(path, "transfers per admitted decision", names, func(r *result) float64 {
		if c := r.cost(); c != nil {
			return c.TransfersPerAdmitted
		}
		return 0
	}, true)
}

// lineChart draws value by callers for the contenders names, one line each,
// one panel per workload, on log scales, and writes it as a PNG. The legend
// goes in a decade of room above the lines (legendTop) or below them.
func (rep *report) lineChart(path, ylabel string, names []string, value func(*result) float64, legendTop bool) error {
	cfg := rep.Meta.Config
	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.Results {
		if v := value(r); r.ran() && v > 0 && slices.Contains(names, r.Contender) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == 0 { // nothing to draw: no stale chart either
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var plots []*plot.Plot
	for _, wl := range cfg.Workloads {
		p := plot.New()
		p.Title.Text = map[string]string{
			"hot":   fmt.Sprintf("one hot user (limit %s per %v)", thousands(float64(cfg.HotLimit)), cfg.Window),
			"zipf":  fmt.Sprintf("%s users, Zipf s=%.2g (limit %s per %v each)", thousands(float64(cfg.Users)), cfg.ZipfS, thousands(float64(cfg.ZipfLimit)), cfg.Window),
			"churn": fmt.Sprintf("churn: Zipf s=%.2g over %s keys, none provisioned (limit %s per %v)", cfg.ZipfS, thousands(float64(cfg.ChurnKeys)), thousands(float64(cfg.ZipfLimit)), cfg.Window),
			"fresh": fmt.Sprintf("fresh: a new key per decision, none provisioned (limit %s per %v)", thousands(float64(cfg.ZipfLimit)), cfg.Window),
		}[wl]
		p.Title.TextStyle.Font.Size = vg.Points(13)
		p.X.Label.Text = "concurrent callers"
		p.Y.Label.Text = ylabel
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		var ticks []plot.Tick
		for _, c := range cfg.Callers {
			ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Y.Tick.Marker = decadeTicks{}
		p.X.Min, p.X.Max = float64(minInt(cfg.Callers))/1.5, float64(maxInt(cfg.Callers))*1.5
		// A decade of room for the legend.
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))-1), math.Pow(10, math.Ceil(math.Log10(hi)))
		if legendTop {
			p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi))+1)
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = legendTop, true
		if legendTop {
			p.Legend.XOffs, p.Legend.YOffs = vg.Points(60), -vg.Points(70) // inside the axes, under the title
		}
		p.Legend.TextStyle.Font.Size = vg.Points(10)
		for _, name := range names {
			var xys plotter.XYs
			for _, r := range rep.Results {
				if v := value(r); r.Workload == wl && r.Contender == name && r.ran() && v > 0 {
					xys = append(xys, plotter.XY{X: float64(r.Callers), Y: v})
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
