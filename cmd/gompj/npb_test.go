package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gompj/gompj"
	"github.com/gompj/gompj/npb"
	"github.com/gompj/gompj/npb/sweep"
)

func TestNPBVerifiedRun(t *testing.T) {
	r := runGompj(t, nil, "npb", "CG", "-class", "S", "-np", "4")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, line := range []string{" CG Benchmark Completed.", " Class           =                        S",
		" Total processes =                        4", " Layout          = 1 node x 4 ranks per node (shm)",
		" Mop/s total     =", " Verification    =  SUCCESSFUL"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("the report lacks %q:\n%s", line, r.stdout)
		}
	}

	// Across two node processes: rank 0 alone prints, once. They share the host's memory.
	r = runGompj(t, nil, "npb", "mg", "-class", "s", "-np", "4", "-nodes", "2")
	if r.code != 0 || strings.Count(r.stdout, "Benchmark Completed") != 1 ||
		!strings.Contains(r.stdout, " Layout          = 2 nodes x 2 ranks per node (shm)") ||
		!strings.Contains(r.stdout, " Verification    =  SUCCESSFUL") {
		t.Fatalf("-nodes 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Pure mode with JSON, as the sweep runs it, the node processes talking as on different hosts.
	r = runGompj(t, []string{"GOMPJ_HOST_SHM=0"}, "npb", "IS", "-class", "S", "-np", "2", "-nodes", "2", "-json")
	rep, err := sweep.ParseReport([]byte(r.stdout))
	if r.code != 0 || err != nil {
		t.Fatalf("-json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if rep.Kernel != "IS" || rep.Class != "S" || rep.NP != 2 || rep.Nodes != 2 || rep.RanksPerNode != 1 ||
		rep.Device != "tcp" || !rep.Verified || rep.MopsTotal <= 0 || rep.Time <= 0 || len(rep.Checks) == 0 {
		t.Fatalf("-json report %+v", rep)
	}
}

func TestNPBBadUsage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "never-made")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"npb", "LU", "-np", "2"}, `unknown kernel "LU"`},
		{[]string{"npb", "CG", "-class", "Q", "-np", "2"}, `unknown problem class "Q"`},
		{[]string{"npb", "CG", "-class", "S", "-np", "3"}, "CG needs a power of two, got 3 ranks"},
		{[]string{"npb", "FT", "-class", "S", "-np", "128", "-nodes", "2"}, "FT class S allows at most 64 ranks"},
		{[]string{"npb", "-np", "2"}, "no KERNEL"},
		{[]string{"npb", "EP", "-np", "2", "-nodes", "3"}, "every node needs at least one rank"},
		{[]string{"npb", "sweep", "-np", "1"}, "-out DIR is required"},
		{[]string{"npb", "sweep", "-out", out, "-modes", "twonodes"}, `unknown mode "twonodes"`},
		{[]string{"npb", "sweep", "-out", out, "-kernel", "BT"}, `unknown kernel "BT"`},
	} {
		r := runGompj(t, nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stdout, "Benchmark Completed") {
			t.Errorf("gompj %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused sweep made its output directory (%v)", err)
	}
}

// A kernel that does not verify: the report says so and the status is 1. The kernels verify, so a stand-in
// returns an unverified result through the same job code the command runs.
func TestNPBUnverifiedExitsOne(t *testing.T) {
	var out, errOut bytes.Buffer
	j := newNPBJob("CG", 'S', "tcp", false)
	j.stdout, j.stderr = &out, &errOut
	j.run = func(c *gompj.Comm, kernel string, class byte) (*npb.Result, error) {
		return &npb.Result{Kernel: kernel, Class: class, NP: c.Size(), Verified: false,
			Checks: []npb.Check{{Name: "zeta", Computed: 8.6, Reference: 8.5971775078648, Tolerance: 1e-10}}}, nil
	}
	if code := j.start(gompj.Config{Ranks: 2, Nodes: 1}); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out.String(), " Verification    =  UNSUCCESSFUL") || !strings.Contains(out.String(), "FAILED") ||
		!strings.Contains(errOut.String(), "CG class S on 2 ranks did not verify") {
		t.Errorf("output:\n%s%s", out.String(), errOut.String())
	}
	j.run = func(c *gompj.Comm, kernel string, class byte) (*npb.Result, error) {
		return &npb.Result{Kernel: kernel, Class: class, NP: c.Size(), Verified: true}, nil
	}
	if code := j.start(gompj.Config{Ranks: 2, Nodes: 1}); code != 0 {
		t.Errorf("verified: exit %d, want 0", code)
	}
}

func TestNPBExample(t *testing.T) {
	r := runGompj(t, nil, "run", "-np", "2", "-nodes", "2", "./examples/npb", "FT", "S")
	if r.code != 0 || !strings.Contains(r.stdout, " Layout          = 2 nodes x 1 rank per node (shm)") ||
		!strings.Contains(r.stdout, " Verification    =  SUCCESSFUL") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runGompj(t, nil, "run", "-np", "3", "-nodes", "2", "./examples/npb", "MG", "S")
	if r.code != 2 || !strings.Contains(r.stderr, "MG needs a power of two, got 3 ranks") {
		t.Fatalf("np=3: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestNPBSweep(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.csv")
	refCSV := "# made up for the test\nkernel,class,np,mops_total,verified,label\nCG,S,1,900,true,test reference\nCG,S,2,1700,true,test reference\n"
	if err := os.WriteFile(ref, []byte(refCSV), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	r := runGompj(t, nil, "npb", "sweep", "-kernel", "CG,IS", "-class", "S", "-np", "1,2,3", "-modes", "onenode,nodes=2",
		"-out", out, "-ref", ref)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "skip CG class S np=3 onenode") || !strings.Contains(r.stdout, "skip IS class S np=1 nodes=2") {
		t.Errorf("the sweep does not say what it skipped:\n%s", r.stdout)
	}
	rows, err := sweep.ReadCSVFile(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range rows {
		if !row.Verified || row.MopsTotal <= 0 || row.Time <= 0 || row.Class != "S" {
			t.Errorf("row %+v", row)
		}
		got = append(got, row.Kernel+" "+row.Label+" np="+string(rune('0'+row.NP))+" "+row.Device)
	}
	want := []string{"CG gompj onenode np=1 shm", "CG gompj onenode np=2 shm", "CG gompj nodes=2 np=2 shm",
		"IS gompj onenode np=1 shm", "IS gompj onenode np=2 shm", "IS gompj nodes=2 np=2 shm"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	for _, k := range []string{"CG", "IS"} {
		for _, chart := range []string{"mops", "speedup"} {
			base := filepath.Join(out, k+"_S_"+chart)
			b, err := os.ReadFile(base + ".png")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("%s.png: %v", base, err)
			}
			b, err = os.ReadFile(base + ".svg")
			if err != nil {
				t.Fatal(err)
			}
			var root struct{ XMLName xml.Name }
			if err := xml.Unmarshal(b, &root); err != nil || root.XMLName.Local != "svg" {
				t.Errorf("%s.svg: root %v, %v", base, root.XMLName, err)
			}
			// The reference concerns CG only.
			if has := bytes.Contains(b, []byte("test reference")); has != (k == "CG") {
				t.Errorf("%s.svg: shows the reference series: %v", base, has)
			}
		}
	}
}
