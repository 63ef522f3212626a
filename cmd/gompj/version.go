package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{name: "version", summary: "gompj's module version, as the build recorded it",
		usage: func(w io.Writer) {
			fmt.Fprintln(w, `usage: gompj version

Prints the version of the gompj module this command was built from, as Go's build information records it: a
release (v0.4.0) for go install ...@v0.4.0, a pseudo-version (v0.0.0-<date>-<commit>) for a build from a git
checkout, "(devel)" for go run or a build without version control information; then the commit, when the
build recorded one.`)
		}, run: versionCmd})
}

func versionCmd(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: gompj version")
		return 2
	}
	bi, _ := debug.ReadBuildInfo()
	v, commit := moduleVersion(bi)
	fmt.Printf("gompj %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if commit != "" {
		fmt.Println(commit)
	}
	return 0
}

// moduleVersion reads the version of the module that holds the main package (gompj, or a module that replaced
// it) from bi, and the commit the build stamped, if any. Nothing here is written by hand: a release says its tag,
// a build from a git checkout its pseudo-version.
func moduleVersion(bi *debug.BuildInfo) (version, commit string) {
	if bi == nil {
		return "unknown (built without module information)", ""
	}
	m := &bi.Main
	if !inModule(bi.Path, m.Path) {
		for _, d := range bi.Deps {
			if inModule(bi.Path, d.Path) {
				m = d
				break
			}
		}
	}
	version = m.Version
	if r := m.Replace; r != nil {
		switch {
		case r.Version != "":
			version = fmt.Sprintf("%s (replaced by %s %s)", version, r.Path, r.Version)
		default:
			version = fmt.Sprintf("%s (replaced by %s)", version, r.Path)
		}
	}
	if m != &bi.Main {
		return version, "" // the vcs settings describe the main module, not this one
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		commit = "commit " + rev
		if at != "" {
			commit += " " + at
		}
		if modified == "true" {
			commit += " (with local changes)"
		}
	}
	return version, commit
}

// inModule reports whether package path pkg belongs to module mod (by path; the longest such module wins in Go,
// and gompj's commands live in gompj's own module).
func inModule(pkg, mod string) bool {
	return mod != "" && (pkg == mod || strings.HasPrefix(pkg, mod+"/"))
}
