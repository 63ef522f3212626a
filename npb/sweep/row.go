package sweep

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gompj/gompj/npb"
)

// Columns are the CSV columns of a Row, in the order WriteCSV writes them.
var Columns = []string{"kernel", "class", "np", "nodes", "ranks_per_node", "device", "time_s", "mops_total",
	"mops_per_rank", "verified", "label"}

// Row is one configuration's figures: measured by a sweep, or taken from a reference run.
type Row struct {
	Kernel       string  `json:"kernel"`         // EP, IS, CG, MG or FT
	Class        string  `json:"class"`          // S, W, A, B or C
	NP           int     `json:"np"`             // ranks in the job
	Nodes        int     `json:"nodes"`          // node processes
	RanksPerNode int     `json:"ranks_per_node"` // ranks of the fullest node
	Device       string  `json:"device"`         // "shm" on one node, else the devices between nodes (npb.LayoutOf)
	Time         float64 `json:"time_s"`         // seconds of the timed region; NaN if unknown
	MopsTotal    float64 `json:"mops_total"`
	MopsPerRank  float64 `json:"mops_per_rank"`
	Verified     bool    `json:"verified"`
	Label        string  `json:"label,omitempty"` // the series: "gompj onenode", "NPB 3.4 Open MPI", ...
}

// Check is one verification quantity of a Report.
type Check struct {
	Name      string  `json:"name"`
	Computed  float64 `json:"computed"`
	Reference float64 `json:"reference"`
	Tolerance float64 `json:"tolerance"`
	OK        bool    `json:"ok"`
}

// Report is the machine-readable form of one run, as `gompj npb -json` prints it on one line: the Row's fields
// (without a label: the sweep adds it) and what NPB's text report adds.
type Report struct {
	Row
	Size       string  `json:"size"`
	Iterations int     `json:"iterations"`
	OpType     string  `json:"op_type"`
	Checks     []Check `json:"checks"`
}

// NewReport builds the report of r, run with layout l.
func NewReport(r *npb.Result, l npb.Layout) Report {
	rep := Report{
		Row: Row{Kernel: r.Kernel, Class: string(r.Class), NP: r.NP, Nodes: l.Nodes, RanksPerNode: l.MaxRanks,
			Device: l.Device, Time: r.Time, MopsTotal: r.MopsTotal, MopsPerRank: r.MopsPerRank, Verified: r.Verified},
		Size: r.Size, Iterations: r.Iterations, OpType: r.OpType,
	}
	for _, c := range r.Checks {
		rep.Checks = append(rep.Checks, Check{Name: c.Name, Computed: c.Computed, Reference: c.Reference,
			Tolerance: c.Tolerance, OK: c.OK()})
	}
	return rep
}

// WriteJSON writes rep as one line of JSON, its fields in the order of the CSV columns. Numbers JSON cannot
// carry (NaN, infinities: a kernel that went badly wrong) are written as null rather than failing the output.
func (rep Report) WriteJSON(w io.Writer) error {
	type check struct {
		Name      string   `json:"name"`
		Computed  *float64 `json:"computed"`
		Reference *float64 `json:"reference"`
		Tolerance *float64 `json:"tolerance"`
		OK        bool     `json:"ok"`
	}
	out := struct {
		Kernel       string   `json:"kernel"`
		Class        string   `json:"class"`
		NP           int      `json:"np"`
		Nodes        int      `json:"nodes"`
		RanksPerNode int      `json:"ranks_per_node"`
		Device       string   `json:"device"`
		Time         *float64 `json:"time_s"`
		MopsTotal    *float64 `json:"mops_total"`
		MopsPerRank  *float64 `json:"mops_per_rank"`
		Verified     bool     `json:"verified"`
		Label        string   `json:"label,omitempty"`
		Size         string   `json:"size"`
		Iterations   int      `json:"iterations"`
		OpType       string   `json:"op_type"`
		Checks       []check  `json:"checks"`
	}{Kernel: rep.Kernel, Class: rep.Class, NP: rep.NP, Nodes: rep.Nodes, RanksPerNode: rep.RanksPerNode,
		Device: rep.Device, Time: finite(rep.Time), MopsTotal: finite(rep.MopsTotal),
		MopsPerRank: finite(rep.MopsPerRank), Verified: rep.Verified, Label: rep.Label, Size: rep.Size,
		Iterations: rep.Iterations, OpType: rep.OpType, Checks: []check{}}
	for _, c := range rep.Checks {
		out.Checks = append(out.Checks, check{Name: c.Name, Computed: finite(c.Computed),
			Reference: finite(c.Reference), Tolerance: finite(c.Tolerance), OK: c.OK})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// finite is v for JSON: nil (null) when JSON cannot carry it.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// ParseReport finds the report in the standard output of `gompj npb -json`: the one line that is a JSON object
// naming a kernel. Other lines (none are expected) are ignored.
func ParseReport(out []byte) (Report, error) {
	var found []Report
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		// null numbers leave the field zero; a missing time is NaN, as in the CSV.
		var raw struct {
			Report
			Time *float64 `json:"time_s"`
		}
		if err := json.Unmarshal(line, &raw); err != nil || raw.Kernel == "" {
			continue
		}
		rep := raw.Report
		rep.Time = math.NaN()
		if raw.Time != nil {
			rep.Time = *raw.Time
		}
		found = append(found, rep)
	}
	if err := sc.Err(); err != nil {
		return Report{}, err
	}
	switch len(found) {
	case 0:
		return Report{}, errors.New("no JSON report in the output")
	case 1:
		return found[0], nil
	}
	return Report{}, fmt.Errorf("%d JSON reports in the output, want one", len(found))
}

// WriteCSV writes rows with a header line. Numbers are written in their shortest exact form, unknown ones (NaN)
// as empty fields.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	num := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	for _, r := range rows {
		rec := []string{r.Kernel, r.Class, strconv.Itoa(r.NP), strconv.Itoa(r.Nodes), strconv.Itoa(r.RanksPerNode),
			r.Device, num(r.Time), num(r.MopsTotal), num(r.MopsPerRank), strconv.FormatBool(r.Verified), r.Label}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteCSVFile writes rows to the file at path (created or truncated).
func WriteCSVFile(path string, rows []Row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteCSV(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// ReadCSV reads rows written by WriteCSV or by hand. The header names the columns (any order; label and the
// placement columns may be left out); lines starting with # are comments. Empty numbers read as NaN, a missing
// node count as 1, a missing ranks_per_node as np/nodes, a missing mops_per_rank as mops_total/np.
func ReadCSV(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty CSV: no header line")
	}
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	for _, need := range []string{"kernel", "class", "np", "mops_total"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("CSV header lacks the %q column (have %s)", need, strings.Join(header, ","))
		}
	}
	var rows []Row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		field := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		bad := func(name string, err error) error {
			return fmt.Errorf("line %d: column %s: %q: %w", line, name, field(name), err)
		}
		integer := func(name string, def int) (int, error) {
			s := field(name)
			if s == "" {
				return def, nil
			}
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 {
				return 0, bad(name, errors.New("want a positive integer"))
			}
			return v, nil
		}
		number := func(name string) (float64, error) {
			s := field(name)
			if s == "" {
				return math.NaN(), nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return 0, bad(name, errors.New("want a number"))
			}
			return v, nil
		}
		var row Row
		row.Kernel, row.Class = strings.ToUpper(field("kernel")), strings.ToUpper(field("class"))
		if row.Kernel == "" || row.Class == "" {
			return nil, fmt.Errorf("line %d: kernel and class must not be empty", line)
		}
		var errs [7]error
		row.NP, errs[0] = integer("np", 0)
		if row.NP == 0 && errs[0] == nil {
			errs[0] = bad("np", errors.New("missing"))
		}
		row.Nodes, errs[1] = integer("nodes", 1)
		row.RanksPerNode, errs[2] = integer("ranks_per_node", 0)
		row.Time, errs[3] = number("time_s")
		row.MopsTotal, errs[4] = number("mops_total")
		row.MopsPerRank, errs[5] = number("mops_per_rank")
		row.Verified, errs[6] = parseBool(field("verified"))
		if errs[6] != nil {
			errs[6] = bad("verified", errs[6])
		}
		if err := errors.Join(errs[:]...); err != nil {
			return nil, err
		}
		if row.RanksPerNode == 0 {
			row.RanksPerNode = (row.NP + row.Nodes - 1) / row.Nodes
		}
		if math.IsNaN(row.MopsPerRank) && row.NP > 0 {
			row.MopsPerRank = row.MopsTotal / float64(row.NP)
		}
		row.Device, row.Label = field("device"), field("label")
		rows = append(rows, row)
	}
}

// ReadCSVFile reads the CSV file at path.
func ReadCSVFile(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "yes", "1", "successful":
		return true, nil
	case "false", "no", "0", "unsuccessful", "":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// DefaultReferenceLabel names reference rows that have no label of their own.
const DefaultReferenceLabel = "reference"

// Merge returns results followed by the reference rows that concern a (kernel, class) present in results, so
// that a chart shows the reference beside the sweep and nothing else. Reference rows keep their own label (the
// series they form), or get DefaultReferenceLabel.
func Merge(results, reference []Row) []Row {
	type kc struct{ kernel, class string }
	have := map[kc]bool{}
	for _, r := range results {
		have[kc{r.Kernel, r.Class}] = true
	}
	out := slices.Clone(results)
	for _, r := range reference {
		if !have[kc{r.Kernel, r.Class}] {
			continue
		}
		if r.Label == "" {
			r.Label = DefaultReferenceLabel
		}
		out = append(out, r)
	}
	return out
}
