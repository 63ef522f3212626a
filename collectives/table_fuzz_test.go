package collectives

import (
	"strings"
	"testing"
)

// FuzzParseTable: a table comes from the environment or a file the user names. Whatever it holds, parsing returns
// rules or an error, never panics, and every rule it returns has sane bounds and a known algorithm.
func FuzzParseTable(f *testing.F) {
	f.Add(defaultTable)
	f.Add("allreduce multi 2-16 0-64K ring # comment\nbcast * * 1M-* scatter_allgather\n")
	f.Add("bcast * 4-2 * binomial")                 // empty ranks range
	f.Add("bcast * * 0-9999999999999999G binomial") // overflowing size
	f.Add("alltoall local 1-* 8K-1M bruck\nscan * * * chain")
	f.Add("#" + strings.Repeat("x", 70000) + "\nbcast * * * binomial\n") // a line longer than the scanner's buffer
	f.Fuzz(func(t *testing.T, text string) {
		rules, err := parseTable(text, "fuzz")
		if err != nil {
			return
		}
		// every line with fields is a rule: none is dropped without an error
		want := 0
		for _, l := range strings.Split(text, "\n") {
			if i := strings.IndexByte(l, '#'); i >= 0 {
				l = l[:i]
			}
			if len(strings.Fields(l)) > 0 {
				want++
			}
		}
		if len(rules) != want {
			t.Fatalf("%d rules from %d lines that hold one", len(rules), want)
		}
		for _, r := range rules {
			if r.npLo < 0 || r.npLo > r.npHi || r.bytesLo < 0 || r.bytesLo > r.bytesHi {
				t.Fatalf("rule %+v has bad bounds", r)
			}
			if _, ok := algorithms[r.coll][r.algo]; !ok {
				t.Fatalf("rule %+v names an unknown algorithm", r)
			}
		}
	})
}
