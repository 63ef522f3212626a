package main

import (
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestModuleVersion(t *testing.T) {
	stamped := &debug.BuildInfo{Path: "github.com/gompj/gompj/cmd/gompj",
		Main: debug.Module{Path: "github.com/gompj/gompj", Version: "v0.0.0-20261123160810-41f41ccd20c9"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "41f41ccd20c975ab4d98f83b0053b7934b0ed6f5"},
			{Key: "vcs.time", Value: "2026-11-23T16:08:10Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		bi              *debug.BuildInfo
		version, commit string
	}{
		{stamped, "v0.0.0-20261123160810-41f41ccd20c9",
			"commit 41f41ccd20c975ab4d98f83b0053b7934b0ed6f5 2026-11-23T16:08:10Z (with local changes)"},
		{&debug.BuildInfo{Path: "github.com/gompj/gompj/cmd/gompj", Main: debug.Module{Path: "github.com/gompj/gompj", Version: "(devel)"}},
			"(devel)", ""},
		// go install github.com/gompj/gompj/cmd/gompj@v0.4.0
		{&debug.BuildInfo{Path: "github.com/gompj/gompj/cmd/gompj", Main: debug.Module{Path: "github.com/gompj/gompj", Version: "v0.4.0"}},
			"v0.4.0", ""},
		// built inside a user's module that requires gompj through a replace directive
		{&debug.BuildInfo{Path: "github.com/gompj/gompj/cmd/gompj", Main: debug.Module{Path: "example.com/lab", Version: "(devel)"},
			Settings: stamped.Settings,
			Deps: []*debug.Module{{Path: "github.com/gompj/gompjx", Version: "v9.9.9"},
				{Path: "github.com/gompj/gompj", Version: "v0.3.0", Replace: &debug.Module{Path: "../gompj"}}}},
			"v0.3.0 (replaced by ../gompj)", ""},
		{nil, "unknown (built without module information)", ""},
	} {
		v, commit := moduleVersion(c.bi)
		if v != c.version || commit != c.commit {
			t.Errorf("moduleVersion = %q, %q; want %q, %q", v, commit, c.version, c.commit)
		}
	}
}

// `gompj version` and `gompj info` print the version that `go version -m` reads from the same binary.
func TestVersionCommand(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", bin.gompj).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+mod\s+github.com/gompj/gompj\s+(\S+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("go version -m: no mod line\n%s", out)
	}
	r := runGompj(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "gompj "+m[1]+" go1.") {
		t.Errorf("gompj version: exit %d, %q; the build info says %s", r.code, r.stdout, m[1])
	}
	if r := runGompj(t, nil, "info"); !strings.HasPrefix(r.stdout, "gompj "+m[1]+" (go1.") {
		t.Errorf("gompj info begins %q; the build info says %s", strings.SplitN(r.stdout, "\n", 2)[0], m[1])
	}
}
