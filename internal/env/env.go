package env

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Kind is how a variable's value is spelled.
type Kind uint8

const (
	Int         Kind = iota // a non-negative integer
	Bool                    // 1, 0, true, false (strconv.ParseBool)
	Duration                // a Go duration: 50us, 1ms, 30s
	DurationOff             // a Go duration where 0 means off (held as a negative duration in Config)
	String                  // text: an address, a path, a name
	Hidden                  // text that is never shown (a secret)
)

var kindNames = [...]string{Int: "integer", Bool: "boolean", Duration: "duration", DurationOff: "duration",
	String: "string", Hidden: "secret"}

func (k Kind) String() string { return kindNames[k] }

// Role says who sets a variable and how a starter passes it on to node processes.
type Role uint8

const (
	// Tuning variables are read by every node process. The launcher passes its own on to every node process it
	// starts, over ssh too.
	Tuning Role = iota
	// Identity variables are set by the starter, per node process (see Job). The launcher replaces any it
	// inherits.
	Identity
	// Host variables name something of one host (an address, a file). They are not passed on to other hosts.
	Host
	// Launcher variables are read by the gompj command itself.
	Launcher
	// Test variables are gompj's own tests' business; `gompj help env` does not list them.
	Test
)

// Group orders `gompj help env`.
type Group string

const (
	OneBox      Group = "one box"
	MultiNode   Group = "multi-node jobs"
	Slurm       Group = "Slurm (srun starts the node processes)"
	Collectives Group = "collectives"
	Command     Group = "the gompj command"
	Tests       Group = "gompj's tests"
)

// Var is the one definition of an environment variable.
type Var struct {
	// Name is GOMPJ_SOMETHING. A family, one variable per member, ends in "<NAME>": GOMPJ_COLL_<NAME> stands for
	// GOMPJ_COLL_ALLREDUCE, GOMPJ_COLL_BCAST...
	Name string
	// Field is the node.Config field the variable fills when that field is zero, or "".
	Field string
	// Not makes a Bool variable fill its field with the negation: a field named No... whose zero value is the
	// variable's default on (GOMPJ_HOST_SHM=0 sets NoHostSHM).
	Not  bool
	Kind Kind
	// Value is the default spelled as the variable would be ("65536", "50us"). node fills a zero Field with it.
	// It is "" when the default is worked out at run time; Default then says how.
	Value string
	// Default describes the default for people, where Value alone does not say it.
	Default string
	Meaning string
	// Job marks variables that every node process of a job must see with the same value (`gompj help env` stars
	// them): the launcher gives every node process its own value.
	Job   bool
	Role  Role
	Group Group
}

// Family reports whether v stands for one variable per member (its name ends in "<NAME>").
func (v *Var) Family() bool { return strings.HasSuffix(v.Name, "<NAME>") }

// prefix is a family's name without "<NAME>".
func (v *Var) prefix() string { return strings.TrimSuffix(v.Name, "<NAME>") }

// Member returns the name of a family's variable for member (GOMPJ_COLL_<NAME>, "ALLREDUCE": GOMPJ_COLL_ALLREDUCE).
func (v *Var) Member(member string) string { return v.prefix() + member }

// DefaultText is the default as `gompj help env` and `gompj info` show it.
func (v *Var) DefaultText() string {
	switch {
	case v.Default != "":
		return v.Default
	case v.Value != "":
		return v.Value
	}
	return "-"
}

// Lookup finds a variable's value, as os.LookupEnv does (tests pass maps).
type Lookup func(name string) (string, bool)

// Get returns the value of v (of a family, of its member name), trimmed, and whether it is set and not blank.
func (v *Var) Get(look Lookup, member ...string) (string, bool) {
	name := v.Name
	if len(member) > 0 {
		name = v.Member(member[0])
	}
	s, ok := look(name)
	s = strings.TrimSpace(s)
	return s, ok && s != ""
}

// On reads a Bool variable: false when unset, an error naming the variable when malformed.
func (v *Var) On(look Lookup) (bool, error) {
	s, ok := v.Get(look)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, v.malformed(s)
	}
	return b, nil
}

// Int reads an Int variable: ok is false when it is unset; an error names the variable when it is malformed.
func (v *Var) Int(look Lookup) (n int, ok bool, err error) {
	s, ok := v.Get(look)
	if !ok {
		return 0, false, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false, v.malformed(s)
	}
	return n, true, nil
}

// Text returns the value of v, or its literal default when it is unset.
func (v *Var) Text(look Lookup) string {
	if s, ok := v.Get(look); ok {
		return s
	}
	return v.Value
}

// Duration reads a Duration variable, or its literal default when it is unset; an error names the variable when
// it is malformed.
func (v *Var) Duration(look Lookup) (time.Duration, error) {
	d, err := time.ParseDuration(v.Text(look))
	if err != nil {
		return 0, v.malformed(v.Text(look))
	}
	return d, nil
}

func (v *Var) malformed(s string) error {
	what := map[Kind]string{Int: "a non-negative integer", Bool: "a boolean (1, 0, true, false)",
		Duration: "a duration (such as 50us, 1ms, 30s)", DurationOff: "a duration (such as 50us, 1ms, 30s)"}[v.Kind]
	return fmt.Errorf("gompj: %s=%q is not %s", v.Name, s, what)
}

var all []*Var

func def(v Var) *Var {
	p := &v
	all = append(all, p)
	return p
}

// All lists every variable in the order of vars.go.
func All() []*Var { return all }

// Find returns the definition of name: the variable itself or the family it is a member of (the family with the
// longest prefix, so that a family GOMPJ_COLL_I<NAME> would win over GOMPJ_COLL_<NAME>), or nil.
func Find(name string) *Var {
	var best *Var
	for _, v := range all {
		switch {
		case v.Name == name:
			return v
		case v.Family() && strings.HasPrefix(name, v.prefix()) && len(name) > len(v.prefix()) &&
			(best == nil || len(v.prefix()) > len(best.prefix())):
			best = v
		}
	}
	return best
}

// Unknown returns the names of the GOMPJ_* variables in environ (NAME=value entries) that no definition knows:
// misspellings, mostly. `gompj info` and `gompj run` warn about them.
func Unknown(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GOMPJ_") && Find(k) == nil {
			out = append(out, k)
		}
	}
	return out
}

// Members returns the entries of environ that are members of family v, as name and value pairs.
func (v *Var) Members(environ []string) [][2]string {
	var out [][2]string
	for _, kv := range environ {
		k, val, _ := strings.Cut(kv, "=")
		if Find(k) == v && k != v.Name {
			out = append(out, [2]string{k, strings.TrimSpace(val)})
		}
	}
	return out
}

// Fill sets every zero field of the struct cfg points to that a variable names, from that variable when it is
// set, and calls set with the name of each variable it used. A malformed value is an error naming the variable.
func Fill(cfg any, look Lookup, set func(name string)) error {
	s := reflect.ValueOf(cfg).Elem()
	for _, v := range all {
		if v.Field == "" {
			continue
		}
		f := s.FieldByName(v.Field)
		if !f.IsValid() || !f.IsZero() {
			continue
		}
		str, ok := v.Get(look)
		if !ok {
			continue
		}
		if err := v.parseInto(f, str); err != nil {
			return err
		}
		if set != nil {
			set(v.Name)
		}
	}
	return nil
}

// Defaults sets every zero field of the struct cfg points to that a variable with a literal default (Value) names.
func Defaults(cfg any) {
	s := reflect.ValueOf(cfg).Elem()
	for _, v := range all {
		if v.Field == "" || v.Value == "" {
			continue
		}
		if f := s.FieldByName(v.Field); f.IsValid() && f.IsZero() {
			if err := v.parseInto(f, v.Value); err != nil {
				panic(err) // vars.go is part of the program; TestDefinitions parses every Value
			}
		}
	}
}

// parseInto parses s as v's kind into the field f.
func (v *Var) parseInto(f reflect.Value, s string) error {
	switch v.Kind {
	case Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || f.OverflowInt(n) {
			return v.malformed(s)
		}
		f.SetInt(n)
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return v.malformed(s)
		}
		f.SetBool(b != v.Not)
	case Duration, DurationOff:
		d, err := time.ParseDuration(s)
		if err != nil {
			return v.malformed(s)
		}
		if d == 0 && v.Kind == DurationOff {
			d = -1 // explicitly off, unlike a zero field, which takes the default
		}
		f.SetInt(int64(d))
	case String:
		f.SetString(s)
	case Hidden:
		f.SetBytes([]byte(s))
	}
	return nil
}

// Show formats the field of the struct cfg points to that v names, as `gompj info` prints it. A zero field
// (a default worked out later, or none) shows DefaultText; a secret only says whether there is one.
func (v *Var) Show(cfg any) string {
	f := reflect.ValueOf(cfg).Elem().FieldByName(v.Field)
	switch {
	case v.Kind == Hidden && f.Len() > 0:
		return fmt.Sprintf("set (%d bytes, hidden)", f.Len())
	case v.Kind == Bool:
		if f.Bool() != v.Not {
			return "1"
		}
		return "0"
	case v.Kind == DurationOff && f.Int() < 0:
		return "0 (off)"
	case f.IsZero():
		return v.DefaultText()
	case v.Kind == Duration || v.Kind == DurationOff:
		return time.Duration(f.Int()).String()
	case v.Kind == Int:
		return strconv.FormatInt(f.Int(), 10)
	}
	return f.String()
}
