package sweep

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gompj/gompj/npb"
)

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func sameRow(a, b Row) bool {
	return a.Kernel == b.Kernel && a.Class == b.Class && a.NP == b.NP && a.Nodes == b.Nodes &&
		a.RanksPerNode == b.RanksPerNode && a.Device == b.Device && sameFloat(a.Time, b.Time) &&
		sameFloat(a.MopsTotal, b.MopsTotal) && sameFloat(a.MopsPerRank, b.MopsPerRank) &&
		a.Verified == b.Verified && a.Label == b.Label
}

func TestCSVRoundTrip(t *testing.T) {
	rows := []Row{
		{Kernel: "CG", Class: "A", NP: 1, Nodes: 1, RanksPerNode: 1, Device: "shm", Time: 0.7654321098765432,
			MopsTotal: 1955.123456789, MopsPerRank: 1955.123456789, Verified: true, Label: "gompj onenode"},
		{Kernel: "FT", Class: "B", NP: 8, Nodes: 2, RanksPerNode: 4, Device: "tcp", Time: 12.5, MopsTotal: 1e-300,
			MopsPerRank: 1.25e-301, Verified: false, Label: `odd, "quoted" label`},
		{Kernel: "EP", Class: "A", NP: 2, Nodes: 1, RanksPerNode: 2, Device: "shm", Time: math.NaN(),
			MopsTotal: 57.5, MopsPerRank: 28.75, Verified: true, Label: "NPB 3.4 Open MPI"},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(b.String(), "\n")
	if header != "kernel,class,np,nodes,ranks_per_node,device,time_s,mops_total,mops_per_rank,verified,label" {
		t.Fatalf("header %q", header)
	}
	if !strings.Contains(b.String(), "\nEP,A,2,1,2,shm,,57.5,28.75,true,NPB 3.4 Open MPI\n") {
		t.Errorf("an unknown time is not written as an empty field:\n%s", b.String())
	}
	got, err := ReadCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(rows))
	}
	for i := range rows {
		if !sameRow(got[i], rows[i]) {
			t.Errorf("row %d: wrote %+v, read %+v", i, rows[i], got[i])
		}
	}
}

func TestReadCSVDefaultsAndErrors(t *testing.T) {
	in := "# a comment\nnp, kernel,class ,mops_total,verified\n# another\n4,cg,a,100,yes\n"
	rows, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Kernel: "CG", Class: "A", NP: 4, Nodes: 1, RanksPerNode: 4, Time: math.NaN(), MopsTotal: 100,
		MopsPerRank: 25, Verified: true}
	if len(rows) != 1 || !sameRow(rows[0], want) {
		t.Fatalf("got %+v, want %+v", rows, want)
	}
	for _, c := range []struct{ in, want string }{
		{"", "no header"},
		{"kernel,class,np\nCG,A,1\n", `lacks the "mops_total" column`},
		{"kernel,class,np,mops_total\nCG,A,1,fast\n", "line 2: column mops_total"},
		{"kernel,class,np,mops_total\nCG,A,0,1\n", "line 2: column np"},
		{"kernel,class,np,mops_total,verified\nCG,A,2,1,maybe\n", "column verified"},
		{"kernel,class,np,mops_total\n,A,2,1\n", "kernel and class must not be empty"},
	} {
		_, err := ReadCSV(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadCSV(%q): got %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

// The reference figures shipped in testdata are the NPB 3.4 MPI table of shared/ANCHORS.md.
func TestReferenceFile(t *testing.T) {
	rows, err := ReadCSVFile(filepath.Join("..", "..", "testdata", "npb", "reference.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 15 {
		t.Fatalf("%d rows, want 15 (5 kernels x class A np=1, A np=2, B np=2)", len(rows))
	}
	want := map[string]float64{"CG A 1": 1971, "MG A 2": 9548, "FT B 2": 5377, "EP A 1": 29.0, "IS B 2": 364}
	for _, r := range rows {
		if r.Label != "NPB 3.4 Open MPI" || !r.Verified || !math.IsNaN(r.Time) {
			t.Errorf("row %+v: want label NPB 3.4 Open MPI, verified, no time", r)
		}
		if math.Abs(r.MopsPerRank*float64(r.NP)-r.MopsTotal) > 1e-9*r.MopsTotal {
			t.Errorf("row %+v: mops_per_rank is not mops_total/np", r)
		}
		if v, ok := want[fmt.Sprintf("%s %s %d", r.Kernel, r.Class, r.NP)]; ok && v != r.MopsTotal {
			t.Errorf("%s class %s np=%d: %v Mop/s, want %v", r.Kernel, r.Class, r.NP, r.MopsTotal, v)
		}
	}
}

func TestMerge(t *testing.T) {
	results := []Row{{Kernel: "CG", Class: "A", NP: 1, MopsTotal: 1, Verified: true, Label: "gompj onenode"}}
	ref := []Row{
		{Kernel: "CG", Class: "A", NP: 1, MopsTotal: 2, Verified: true, Label: "NPB 3.4 Open MPI"},
		{Kernel: "CG", Class: "B", NP: 2, MopsTotal: 3, Verified: true, Label: "NPB 3.4 Open MPI"},
		{Kernel: "MG", Class: "A", NP: 1, MopsTotal: 4, Verified: true, Label: "NPB 3.4 Open MPI"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 5, Verified: true},
	}
	got := Merge(results, ref)
	var labels []string
	for _, r := range got {
		labels = append(labels, fmt.Sprintf("%s%s/%d/%s", r.Kernel, r.Class, r.NP, r.Label))
	}
	want := []string{"CGA/1/gompj onenode", "CGA/1/NPB 3.4 Open MPI", "CGA/2/reference"}
	if !slices.Equal(labels, want) {
		t.Fatalf("merged %v, want %v", labels, want)
	}
	if ref[3].Label != "" || len(results) != 1 {
		t.Error("Merge changed its arguments")
	}
	series := Group(got)
	if len(series) != 3 || series[1].Label != "NPB 3.4 Open MPI" || series[2].Label != DefaultReferenceLabel {
		t.Errorf("the reference rows do not form their own series: %+v", series)
	}
}

func TestGroupAndSpeedup(t *testing.T) {
	rows := []Row{
		{Kernel: "CG", Class: "A", NP: 4, MopsTotal: 300, Verified: true, Label: "a"},
		{Kernel: "CG", Class: "A", NP: 1, MopsTotal: 100, Verified: true, Label: "a"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 150, Verified: true, Label: "a"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 180, Verified: true, Label: "a"},  // a better repeat
		{Kernel: "CG", Class: "A", NP: 8, MopsTotal: 999, Verified: false, Label: "a"}, // not verified: left out
		{Kernel: "CG", Class: "A", NP: 16, MopsTotal: math.NaN(), Verified: true, Label: "a"},
		// No np=1 row: the smallest np (2) is the base, taken as ideal.
		{Kernel: "CG", Class: "A", NP: 8, MopsTotal: 500, Verified: true, Label: "b"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 200, Verified: true, Label: "b"},
		// No np=1 row, but series "a" (same first word, same kernel and class) has one.
		{Kernel: "CG", Class: "A", NP: 4, MopsTotal: 250, Verified: true, Label: "a nodes=2"},
		// Same label, other class: a series of its own, which must not lend its np=1 row to class A.
		{Kernel: "CG", Class: "B", NP: 1, MopsTotal: 50, Verified: true, Label: "b"},
	}
	ss := Group(rows)
	if len(ss) != 4 || ss[0].Label != "a" || ss[1].Label != "b" || ss[2].Label != "a nodes=2" || ss[3].Class != "B" {
		t.Fatalf("series %+v", ss)
	}
	check := func(name string, got, want []Point) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", name, got, want)
		}
		for i := range got {
			if got[i].NP != want[i].NP || math.Abs(got[i].Value-want[i].Value) > 1e-12 {
				t.Fatalf("%s: %v, want %v", name, got, want)
			}
		}
	}
	check("a mops", ss[0].Mops(), []Point{{1, 100}, {2, 180}, {4, 300}})
	check("a speedup", ss[0].Speedup(), []Point{{1, 1}, {2, 1.8}, {4, 3}})
	check("b speedup", ss[1].Speedup(), []Point{{2, 2}, {8, 5}})

	bases := Bases(ss)
	check("a speedup from its base", ss[0].SpeedupFrom(bases[0]), []Point{{1, 1}, {2, 1.8}, {4, 3}})
	check("b speedup from its base", ss[1].SpeedupFrom(bases[1]), []Point{{2, 2}, {8, 5}})
	check("a nodes=2 speedup from a's np=1", ss[2].SpeedupFrom(bases[2]), []Point{{4, 2.5}})
	if bases[2].Label != "a" || bases[1].Label != "b" || bases[1].Class != "A" {
		t.Errorf("bases %+v", bases)
	}
}

func TestPlotWritesPNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	rows := Merge([]Row{
		{Kernel: "CG", Class: "A", NP: 1, MopsTotal: 1500, Verified: true, Label: "gompj onenode"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 2800, Verified: true, Label: "gompj onenode"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 2100, Verified: true, Label: "gompj pure"},
		{Kernel: "EP", Class: "A", NP: 1, MopsTotal: 30, Verified: true, Label: "gompj onenode"},
		{Kernel: "IS", Class: "A", NP: 1, MopsTotal: 30, Verified: false, Label: "gompj onenode"}, // nothing to draw
	}, []Row{
		{Kernel: "CG", Class: "A", NP: 1, MopsTotal: 1971, Verified: true, Label: "NPB 3.4 Open MPI"},
		{Kernel: "CG", Class: "A", NP: 2, MopsTotal: 4435, Verified: true, Label: "NPB 3.4 Open MPI"},
	})
	files, err := Plot(rows, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	want := []string{"CG_A_mops.png", "CG_A_mops.svg", "CG_A_speedup.png", "CG_A_speedup.svg",
		"EP_A_mops.png", "EP_A_mops.svg", "EP_A_speedup.png", "EP_A_speedup.svg"}
	if !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}
	for _, f := range files {
		checkChart(t, f)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "CG_A_mops.svg"))
	for _, label := range []string{"NPB 3.4 Open MPI", "gompj onenode", "gompj pure", "NPB CG class A"} {
		if !bytes.Contains(svg, []byte(label)) {
			t.Errorf("CG_A_mops.svg does not show %q", label)
		}
	}
	if svg, _ := os.ReadFile(filepath.Join(dir, "CG_A_speedup.svg")); !bytes.Contains(svg, []byte("ideal")) {
		t.Error("the speedup chart has no ideal line in its legend")
	}
}

// checkChart fails unless path is a decodable PNG or a well-formed SVG document with some drawing in it.
func checkChart(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch filepath.Ext(path) {
	case ".png":
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", path, err)
		}
		if r := img.Bounds(); r.Dx() < 200 || r.Dy() < 150 {
			t.Errorf("%s: %dx%d pixels", path, r.Dx(), r.Dy())
		}
	case ".svg":
		d := xml.NewDecoder(bytes.NewReader(b))
		root, elements := "", 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed XML: %v", path, err)
			}
			if se, ok := tok.(xml.StartElement); ok {
				if root == "" {
					root = se.Name.Local
				}
				elements++
			}
		}
		if root != "svg" || elements < 10 {
			t.Errorf("%s: root element %q, %d elements", path, root, elements)
		}
	default:
		t.Errorf("%s: unexpected file", path)
	}
}

func TestReportJSON(t *testing.T) {
	res := &npb.Result{Kernel: "CG", Class: 'A', Size: "14000", Iterations: 15, Time: 1.5, MopsTotal: 1000,
		MopsPerRank: 250, NP: 4, OpType: "floating point", Verified: true,
		Checks: []npb.Check{{Name: "zeta", Computed: 17.130235054029, Reference: 17.130235054029, Tolerance: 1e-10}}}
	rep := NewReport(res, npb.Layout{Nodes: 2, MinRanks: 2, MaxRanks: 2, Device: "tcp"})
	var b bytes.Buffer
	b.WriteString("some other line\n{\"not\": \"a report\"}\n")
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 3 {
		t.Fatalf("the report is not one line:\n%s", b.String())
	}
	got, err := ParseReport(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Kernel: "CG", Class: "A", NP: 4, Nodes: 2, RanksPerNode: 2, Device: "tcp", Time: 1.5, MopsTotal: 1000,
		MopsPerRank: 250, Verified: true}
	if !sameRow(got.Row, want) || got.Size != "14000" || got.Iterations != 15 || len(got.Checks) != 1 ||
		!got.Checks[0].OK || got.Checks[0].Name != "zeta" {
		t.Fatalf("parsed %+v", got)
	}

	// A kernel gone wrong: NaN cannot be JSON, so it is null and reads back as unknown.
	res.Time, res.Verified = math.NaN(), false
	res.Checks[0].Computed = math.NaN()
	b.Reset()
	if err := NewReport(res, npb.Layout{Nodes: 1, MinRanks: 4, MaxRanks: 4, Device: "shm"}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	got, err = ParseReport(b.Bytes())
	if err != nil || !math.IsNaN(got.Time) || got.Verified || got.Checks[0].OK {
		t.Fatalf("NaN report: %+v, %v\n%s", got, err, b.String())
	}

	if _, err := ParseReport([]byte("no report here\n")); err == nil {
		t.Error("ParseReport found a report in text")
	}
	two := append(append([]byte{}, b.Bytes()...), b.Bytes()...)
	if _, err := ParseReport(two); err == nil || !strings.Contains(err.Error(), "2 JSON reports") {
		t.Errorf("two reports: %v", err)
	}
}

func TestParseModesAndArgs(t *testing.T) {
	modes, err := ParseModes("onenode, nodes=2,pure,rpn=3")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		np   int
		want [4]string // the placement flags per mode; "-" when the mode cannot place np ranks
	}{
		{1, [4]string{"", "-", "-nodes 1", "-ranks-per-node 3"}},
		{4, [4]string{"", "-nodes 2", "-nodes 4", "-ranks-per-node 3"}},
	}
	for _, c := range cases {
		for i, m := range modes {
			args, ok := m.Args("CG", "A", c.np)
			base := fmt.Sprintf("npb CG -class A -np %d -json", c.np)
			got := "-"
			if ok {
				got = strings.TrimSpace(strings.TrimPrefix(strings.Join(args, " "), base))
				if !strings.HasPrefix(strings.Join(args, " "), base) {
					t.Errorf("%s np=%d: args %q", m.Name, c.np, args)
				}
			}
			if got != c.want[i] {
				t.Errorf("%s np=%d: placement %q, want %q", m.Name, c.np, got, c.want[i])
			}
		}
	}
	for _, bad := range []string{"", "nodes", "nodes=0", "rpn=x", "pure=2", "twonodes"} {
		if _, err := ParseModes(bad); err == nil {
			t.Errorf("ParseModes(%q) accepted it", bad)
		}
	}
}

// fakeRunner answers like `gompj npb ... -json` would, from a table of Mop/s by configuration; it records the
// runs it was asked for.
type fakeRunner struct {
	calls  []string
	mops   map[string][]float64 // "KERNEL np=N nodes=K" -> Mop/s of successive runs
	broken map[string]bool      // configurations that crash
	bad    map[string]bool      // configurations that do not verify
}

func (f *fakeRunner) run(_ context.Context, args []string) ([]byte, []byte, error) {
	f.calls = append(f.calls, strings.Join(args, " "))
	kernel, np, nodes := args[1], 0, 1
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-np":
			np, _ = strconv.Atoi(args[i+1])
		case "-nodes":
			nodes, _ = strconv.Atoi(args[i+1])
		}
	}
	key := fmt.Sprintf("%s np=%d nodes=%d", kernel, np, nodes)
	if f.broken[key] {
		return []byte("partial output\n"), []byte("gompj npb: gompj: lost node 1\n"), errors.New("exit status 1")
	}
	m := f.mops[key]
	if len(m) == 0 {
		return nil, nil, fmt.Errorf("fake: no figures for %s", key)
	}
	mops := m[0]
	f.mops[key] = m[1:]
	dev := "shm"
	if nodes > 1 {
		dev = "tcp"
	}
	res := &npb.Result{Kernel: kernel, Class: 'S', NP: np, Time: 1000 / mops, MopsTotal: mops,
		MopsPerRank: mops / float64(np), Verified: !f.bad[key],
		Checks: []npb.Check{{Name: "zeta", Computed: 1, Reference: 1, Tolerance: 1e-10}}}
	if f.bad[key] {
		res.Checks[0].Computed = 2
	}
	var out bytes.Buffer
	NewReport(res, npb.Layout{Nodes: nodes, MinRanks: np / nodes, MaxRanks: (np + nodes - 1) / nodes, Device: dev}).WriteJSON(&out)
	var err error
	if f.bad[key] {
		err = errors.New("exit status 1")
	}
	return out.Bytes(), nil, err
}

func TestRunSweep(t *testing.T) {
	f := &fakeRunner{
		mops: map[string][]float64{
			"CG np=1 nodes=1": {100, 120}, "CG np=2 nodes=1": {150, 140}, "CG np=2 nodes=2": {90, 95},
			"EP np=1 nodes=1": {10, 10}, "EP np=2 nodes=1": {20, 20}, "EP np=3 nodes=1": {30, 30},
			"EP np=3 nodes=2": {25, 25},
		},
		broken: map[string]bool{"EP np=2 nodes=2": true},
		bad:    map[string]bool{"EP np=3 nodes=2": true},
	}
	modes, _ := ParseModes("onenode,nodes=2")
	var log bytes.Buffer
	rows, err := Run(context.Background(), Config{Kernels: []string{"cg", "EP"}, Classes: []string{"s"},
		NPs: []int{1, 2, 3}, Modes: modes, Repeat: 2, Run: f.run, Log: &log})

	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s np=%d nodes=%d %s %g %v", r.Kernel, r.NP, r.Nodes, r.Label, r.MopsTotal, r.Verified))
	}
	want := []string{
		"CG np=1 nodes=1 gompj onenode 120 true", // the faster of two runs
		"CG np=2 nodes=1 gompj onenode 150 true",
		"CG np=2 nodes=2 gompj nodes=2 95 true",
		"EP np=1 nodes=1 gompj onenode 10 true",
		"EP np=2 nodes=1 gompj onenode 20 true",
		"EP np=3 nodes=1 gompj onenode 30 true",
		"EP np=3 nodes=2 gompj nodes=2 25 false",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, c := range f.calls {
		if strings.Contains(c, "CG -class S -np 3") || strings.Contains(c, "-np 1 -json -nodes 2") {
			t.Errorf("ran %q, which NPB or the mode does not allow", c)
		}
	}
	for _, s := range []string{"skip CG class S np=3 onenode", "process count not allowed",
		"skip CG class S np=1 nodes=2: fewer ranks than node processes", "NOT VERIFIED (zeta computed 2, reference 1)",
		"FAIL EP class S np=2 nodes=2", "lost node 1"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("the log lacks %q:\n%s", s, log.String())
		}
	}
	if err == nil || !strings.Contains(err.Error(), "EP class S np=2 nodes=2 (gompj npb EP -class S -np 2 -json -nodes 2)") ||
		!strings.Contains(err.Error(), "EP class S np=3 nodes=2 did not verify") {
		t.Errorf("error %v: want the failed and the unverified configuration named", err)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	run := func(ctx context.Context, args []string) ([]byte, []byte, error) {
		calls++
		cancel() // as if interrupted during the first run
		return nil, nil, ctx.Err()
	}
	modes, _ := ParseModes("onenode")
	rows, err := Run(ctx, Config{Kernels: []string{"EP"}, Classes: []string{"S"}, NPs: []int{1, 2, 4}, Modes: modes, Run: run})
	if calls != 1 || len(rows) != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("%d runs, rows %v, error %v", calls, rows, err)
	}
}
