package env

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every definition is complete and its literal default parses as its kind.
func TestDefinitions(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All() {
		if !regexp.MustCompile(`^GOMPJ_[A-Z0-9_]+(<NAME>)?$`).MatchString(v.Name) {
			t.Errorf("%q is not a GOMPJ_ name", v.Name)
		}
		if seen[v.Name] {
			t.Errorf("%s defined twice", v.Name)
		}
		seen[v.Name] = true
		if v.Meaning == "" || v.Group == "" {
			t.Errorf("%s: no meaning or group", v.Name)
		}
		if v.Family() && v.Field != "" {
			t.Errorf("%s: a family cannot fill one Config field", v.Name)
		}
		if v.Value != "" {
			var probe struct {
				I int64
				B bool
				D time.Duration
				S string
				X []byte
			}
			field := map[Kind]string{Int: "I", Bool: "B", Duration: "D", DurationOff: "D", String: "S", Hidden: "X"}[v.Kind]
			if err := v.parseInto(reflect.ValueOf(&probe).Elem().FieldByName(field), v.Value); err != nil {
				t.Errorf("%s: default %q: %v", v.Name, v.Value, err)
			}
		}
		if Find(v.Name) != v {
			t.Errorf("Find(%s) does not find it", v.Name)
		}
	}
}

func TestFindAndUnknown(t *testing.T) {
	if Find("GOMPJ_COLL_ALLREDUCE") != CollAlgorithm || Find("GOMPJ_COLL_TABLE") != CollTable ||
		Find("GOMPJ_COLL_") != nil || Find("GOMPJ_SPNI") != nil || Find("GOMPJ_NP") != NP {
		t.Fatal("Find resolves names wrongly")
	}
	got := Unknown([]string{"GOMPJ_NP=2", "GOMPJ_SPNI=1us", "HOME=/root", "GOMPJ_COLL_BCAST=shm", "GOMPJ_NETSPIN=1"})
	if !slices.Equal(got, []string{"GOMPJ_SPNI", "GOMPJ_NETSPIN"}) {
		t.Fatalf("Unknown = %v", got)
	}
	if m := CollAlgorithm.Members([]string{"GOMPJ_COLL_BCAST= shm ", "GOMPJ_COLL_TABLE=x", "GOMPJ_NP=1"}); len(m) != 1 ||
		m[0] != [2]string{"GOMPJ_COLL_BCAST", "shm"} {
		t.Fatalf("Members = %v", m)
	}
}

type cfg struct {
	Ranks, EagerLimit, Yields, Nodes, NodeID, RanksPerNode, NetEagerLimit, Stripes int
	Pin, ServeCoordinator, Lazy                                                    bool
	SpinTime, NetSpin, BusyPoll, Timeout                                           time.Duration
	Coordinator, Listen                                                            string
	Secret                                                                         []byte
	UnexpectedLimit                                                                int64
}

func lookup(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFillAndDefaults(t *testing.T) {
	var used []string
	c := cfg{Stripes: 4}
	err := Fill(&c, lookup(map[string]string{"GOMPJ_NP": " 6 ", "GOMPJ_SPIN": "0", "GOMPJ_NET_SPIN": "2ms",
		"GOMPJ_PIN": "true", "GOMPJ_SECRET": "0123456789abcdef", "GOMPJ_STRIPES": "2", "GOMPJ_LISTEN": "",
		"GOMPJ_UNEXPECTED_LIMIT": "1000"}), func(n string) { used = append(used, n) })
	if err != nil {
		t.Fatal(err)
	}
	if c.Ranks != 6 || c.SpinTime != -1 || c.NetSpin != 2*time.Millisecond || !c.Pin || string(c.Secret) != "0123456789abcdef" ||
		c.Stripes != 4 || c.Listen != "" || c.UnexpectedLimit != 1000 {
		t.Fatalf("Fill: %+v", c)
	}
	if !slices.Equal(used, []string{"GOMPJ_NP", "GOMPJ_PIN", "GOMPJ_SPIN", "GOMPJ_UNEXPECTED_LIMIT", "GOMPJ_SECRET", "GOMPJ_NET_SPIN"}) {
		t.Fatalf("sources: %v", used)
	}
	Defaults(&c)
	if c.EagerLimit != 65536 || c.Nodes != 1 || c.Timeout != 30*time.Second || c.BusyPoll != 0 ||
		c.Stripes != 4 || c.SpinTime != -1 || c.Yields != 0 || c.Ranks != 6 {
		t.Fatalf("Defaults: %+v", c)
	}
	if got := Spin.Show(&c); got != "0 (off)" {
		t.Errorf("Show(SPIN) = %q", got)
	}
	if got := Yields.Show(&c); got != Yields.Default {
		t.Errorf("Show(YIELDS) = %q", got)
	}
	if got := Secret.Show(&c); strings.Contains(got, "0123") || !strings.Contains(got, "16 bytes") {
		t.Errorf("Show(SECRET) = %q", got)
	}
	if got := Timeout.Show(&c); got != "30s" {
		t.Errorf("Show(TIMEOUT) = %q", got)
	}
	// A negated boolean: the variable on by default, its field a No... whose zero value means on.
	var neg struct{ NoThing bool }
	thing := &Var{Name: "GOMPJ_THING", Field: "NoThing", Kind: Bool, Not: true}
	if thing.Show(&neg) != "1" {
		t.Errorf("Show(zero NoThing) = %q", thing.Show(&neg))
	}
	if err := thing.parseInto(reflect.ValueOf(&neg).Elem().Field(0), "0"); err != nil || !neg.NoThing || thing.Show(&neg) != "0" {
		t.Errorf("GOMPJ_THING=0: %+v %v, shown %q", neg, err, thing.Show(&neg))
	}
	for name, bad := range map[string]string{"GOMPJ_NP": "-1", "GOMPJ_PIN": "maybe", "GOMPJ_SPIN": "5", "GOMPJ_YIELDS": "x"} {
		err := Fill(&cfg{}, lookup(map[string]string{name: bad}), nil)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v", name, bad, err)
		}
	}
}

func TestJobEnviron(t *testing.T) {
	base := []string{"PATH=/bin", "GOMPJ_NP=99", "GOMPJ_NODE_ID=5", "GOMPJ_SECRET=old-secret-old-secret", "GOMPJ_SPIN=0",
		"GOMPJ_TIMEOUT=1m", "GOMPJ_SSH=ssh -p 2"}
	got := Job{Ranks: 4, Nodes: 2, Node: 0, Coordinator: "127.0.0.1:9", Secret: "s", Timeout: time.Second}.Environ(base)
	want := []string{"PATH=/bin", "GOMPJ_SPIN=0", "GOMPJ_SSH=ssh -p 2", "GOMPJ_NP=4", "GOMPJ_NODES=2", "GOMPJ_NODE_ID=0",
		"GOMPJ_COORDINATOR=127.0.0.1:9", "GOMPJ_SECRET=s", "GOMPJ_TIMEOUT=1s"}
	if !slices.Equal(got, want) {
		t.Fatalf("Environ:\n got %q\nwant %q", got, want)
	}
	fw := Forwarded(append(base, "GOMPJ_LISTEN=10.0.0.1", "GOMPJ_MINE=1", "GOMPJ_COLL_BCAST=shm", "GOMPJ_HARNESS_JOB=x"))
	if !slices.Equal(fw, []string{"GOMPJ_SPIN=0", "GOMPJ_TIMEOUT=1m", "GOMPJ_MINE=1", "GOMPJ_COLL_BCAST=shm"}) {
		t.Fatalf("Forwarded: %q", fw)
	}
}

// Every GOMPJ_ name that gompj's sources and documents spell is defined here: a variable read or documented
// anywhere else without an entry (or misspelt) fails this test.
func TestEveryNameIsDefined(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`GOMPJ_[A-Z0-9_]*[A-Z0-9](<[A-Z]+>)?`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// This package spells examples and misspellings on purpose.
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata" ||
			path == filepath.Join(root, "internal", "env")) {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); d.IsDir() || ext != ".go" && ext != ".md" && ext != ".sh" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllString(string(b), -1) {
			if strings.HasSuffix(m, ">") {
				m = m[:strings.IndexByte(m, '<')] + "<NAME>"
			}
			if Find(m) == nil && !isFamilyPrefix(m) {
				t.Errorf("%s: %s is not defined in internal/env/vars.go", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isFamilyPrefix accepts "GOMPJ_COLL_" written out to build members, and "GOMPJ_COLL_<COLLECTIVE>" in prose.
func isFamilyPrefix(s string) bool {
	for _, v := range All() {
		if v.Family() && (s+"_" == v.prefix() || s == v.Name) {
			return true
		}
	}
	return false
}
