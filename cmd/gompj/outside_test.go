package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeProgram returns the one ```go block of README.md's "## A complete program" section.
func readmeProgram(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bin.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## A complete program\n")
	if !ok {
		t.Fatal(`README.md has no "## A complete program" section`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	blocks := strings.Split(section, "\n```go\n")
	if len(blocks) != 2 {
		t.Fatalf(`README.md's "A complete program" holds %d go blocks, want one`, len(blocks)-1)
	}
	code, _, ok := strings.Cut(blocks[1], "\n```\n")
	if !ok {
		t.Fatal(`README.md's complete program has no closing fence`)
	}
	return code + "\n"
}

// The outside user: a module of its own, outside the repository, that requires github.com/gompj/gompj through
// the README's `go mod edit -replace` to this checkout, builds the README's complete program exactly as printed,
// offline (GOPROXY=off: the module cache holds the dependencies; go.sum is seeded from the checkout's, as
// sum.golang.org would fill it), and runs it under `gompj run` on one node and on two node processes.
func TestOutsideModuleBuildsTheREADMEProgram(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(bin.root)
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the outside module %s is inside the repository %s", dir, root)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(readmeProgram(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd("mod", "init", "example.com/outside")
	goCmd("mod", "edit", "-replace", "github.com/gompj/gompj="+root)
	prog := filepath.Join(dir, "sum-of-ranks")
	goCmd("build", "-o", prog, ".")
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(mod), "require github.com/gompj/gompj ") {
		t.Fatalf("go build did not add the requirement:\n%s", mod)
	}

	for _, args := range [][]string{{"-np", "4"}, {"-np", "4", "-nodes", "2"}} {
		r := runGompj(t, nil, append(append([]string{"run"}, args...), prog)...)
		if r.code != 0 || r.stdout != "4 ranks, sum of ranks 6\n" {
			t.Errorf("gompj run %v: exit %d, stdout %q\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
}
