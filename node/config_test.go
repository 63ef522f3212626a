package node

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gompj/gompj/internal/env"
)

// Every exported Config field is filled by exactly one variable of internal/env, of a matching kind, and every
// variable that names a field names one of Config's.
func TestConfigFieldsHaveVariables(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	byField := map[string]*env.Var{}
	for _, v := range env.All() {
		if v.Field == "" {
			continue
		}
		if byField[v.Field] != nil {
			t.Errorf("Config.%s is named by %s and %s", v.Field, byField[v.Field].Name, v.Name)
		}
		byField[v.Field] = v
		f, ok := typ.FieldByName(v.Field)
		if !ok {
			t.Errorf("%s names Config.%s, which does not exist", v.Name, v.Field)
			continue
		}
		want := map[env.Kind][]reflect.Kind{env.Int: {reflect.Int, reflect.Int64}, env.Bool: {reflect.Bool},
			env.Duration: {reflect.Int64}, env.DurationOff: {reflect.Int64}, env.String: {reflect.String},
			env.Hidden: {reflect.Slice}}[v.Kind]
		ok = false
		for _, k := range want {
			ok = ok || f.Type.Kind() == k
		}
		if isDur := f.Type == reflect.TypeOf(time.Duration(0)); isDur != (v.Kind == env.Duration || v.Kind == env.DurationOff) {
			ok = false
		}
		if !ok {
			t.Errorf("%s is a %v, Config.%s a %v", v.Name, v.Kind, v.Field, f.Type)
		}
	}
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() && byField[f.Name] == nil {
			t.Errorf("Config.%s has no variable in internal/env/vars.go", f.Name)
		}
	}
}

// Effective lists every variable but the tests', with the environment's value and source, the defaults filled
// in, and the secret hidden.
func TestEffective(t *testing.T) {
	t.Setenv("GOMPJ_NO_SLURM", "1")
	t.Setenv("GOMPJ_STRIPES", "3")
	t.Setenv("GOMPJ_SPIN", "0")
	t.Setenv("GOMPJ_SECRET", "0123456789abcdef0123")
	t.Setenv("GOMPJ_COLL_BCAST", "linear")
	t.Setenv("GOMPJ_SSH", "ssh -p 2")
	got := map[string]Setting{}
	settings, err := Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		got[s.Variable] = s
	}
	for name, want := range map[string]Setting{
		"GOMPJ_STRIPES":         {Value: "3", Source: "env"},
		"GOMPJ_SPIN":            {Value: "0 (off)", Source: "env"},
		"GOMPJ_NET_EAGER_LIMIT": {Value: "131072", Source: "default"},
		"GOMPJ_TIMEOUT":         {Value: "30s", Source: "default"},
		"GOMPJ_YIELDS":          {Value: env.Yields.Default, Source: "default"},
		"GOMPJ_COLL_BCAST":      {Value: "linear", Source: "env"},
		"GOMPJ_SSH":             {Value: "ssh -p 2", Source: "env"},
		"GOMPJ_NO_SLURM":        {Value: "1", Source: "env"},
		"GOMPJ_KEY_FILE":        {Value: "~/.gompj/key", Source: "default"},
	} {
		if g := got[name]; g.Value != want.Value || g.Source != want.Source {
			t.Errorf("%s: %+v, want %+v", name, g, want)
		}
	}
	if s := got["GOMPJ_SECRET"]; strings.Contains(s.Value, "0123") || s.Source != "env" {
		t.Errorf("secret shown as %+v", s)
	}
	if _, ok := got["GOMPJ_COLL_<NAME>"]; ok {
		t.Error("a family with a member set is listed as unset too")
	}
	if _, ok := got["GOMPJ_HARNESS_JOB"]; ok {
		t.Error("a test variable is listed")
	}
	if len(got) < len(env.All())-4 {
		t.Errorf("%d settings for %d variables", len(got), len(env.All()))
	}
}

// TestBusyPollFollowsHostRanks: the devices' progress loops poll before sleeping (the device's default) while the
// host's ranks fit its cores, not where they outnumber them; GOMPJ_BUSY_POLL wins either way.
func TestBusyPollFollowsHostRanks(t *testing.T) {
	cores := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		set   time.Duration
		ranks int
		want  time.Duration
	}{
		{0, cores, 0}, {0, 1, 0}, {0, cores + 1, -1}, {0, 4 * cores, -1},
		{20 * time.Microsecond, 4 * cores, 20 * time.Microsecond}, {-1, 1, -1},
	} {
		if got := busyPoll(Config{BusyPoll: c.set}, c.ranks); got != c.want {
			t.Errorf("GOMPJ_BUSY_POLL %v, %d ranks on %d cores: %v, want %v", c.set, c.ranks, cores, got, c.want)
		}
	}
}

// TestPolicyFollowsHostRanks: ranks spin only where the host's ranks fit its cores; where they do not, a node
// process whose own ranks would fit yields sharedHostYields times before parking if it shares the host with other
// node processes, no more of them than cores; otherwise 10 times. GOMPJ_SPIN and GOMPJ_YIELDS override.
func TestPolicyFollowsHostRanks(t *testing.T) {
	// A fixed count: other tests of the package change GOMAXPROCS (shareCores), and a row needs two node processes
	// to fit the cores.
	const cores = 4
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cores))
	for _, c := range []struct {
		cfg                  Config
		process, host, procs int
		spin                 bool
		yields               int
	}{
		{Config{}, cores, cores, 1, true, 50},
		{Config{}, 1, 1, 1, true, 50},
		{Config{}, 1, cores, cores, true, 50},
		{Config{}, cores, 2 * cores, 2, false, sharedHostYields},
		{Config{}, 1, cores + 1, cores, false, sharedHostYields},
		{Config{}, 1, cores + 1, cores + 1, false, 10},   // more node processes than cores
		{Config{}, cores + 1, cores + 1, 1, false, 10},   // one process, more ranks than cores
		{Config{}, cores + 1, 2*cores + 2, 2, false, 10}, // more ranks than cores in the process
		{Config{Yields: 7}, cores, 2 * cores, 2, false, 7},
		{Config{SpinTime: time.Microsecond}, cores, 2 * cores, 2, true, sharedHostYields},
		{Config{SpinTime: -1}, 1, 1, 1, false, 50},
	} {
		p := policy(c.cfg, c.process, c.host, c.procs)
		if (p.Spin > 0) != c.spin || p.Yields != c.yields {
			t.Errorf("%+v, %d ranks of %d in %d node processes on the host's %d cores: spin %v, %d yields; want spin %v, %d yields",
				c.cfg, c.process, c.host, c.procs, cores, p.Spin, p.Yields, c.spin, c.yields)
		}
	}
}
