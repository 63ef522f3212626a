//go:build unix

package proc

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary plays the child: PROC_TEST_CHILD says how it ends.
func TestMain(m *testing.M) {
	switch os.Getenv("PROC_TEST_CHILD") {
	case "exit3":
		os.Exit(3)
	case "parent":
		// Start a grandchild in the same process group, print its pid, wait for it, and wait on: only a signal
		// ends this process. (Exiting once the grandchild is gone raced the signal's delivery to this process:
		// the group's SIGTERM could end the grandchild, and this process exit 0, before the runtime acted on its
		// own SIGTERM, 2 runs in 500.)
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "PROC_TEST_CHILD=sleep")
		if err := c.Start(); err != nil {
			os.Exit(10)
		}
		os.Stdout.WriteString(strconv.Itoa(c.Process.Pid) + "\n")
		c.Wait()
		sleepForever()
	case "sleep":
		sleepForever()
	}
	os.Exit(m.Run())
}

// sleepForever blocks until a signal ends the process (a timer, not select{}, which the runtime would report as
// a deadlock).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func child(mode string) *exec.Cmd {
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "PROC_TEST_CHILD="+mode)
	return c
}

func TestExitStatus(t *testing.T) {
	c := child("exit3")
	c.Run()
	if got := ExitStatus(c); got != 3 {
		t.Errorf("exit 3: ExitStatus = %d", got)
	}
	if got := ExitStatus(exec.Command("never-started")); got != 1 {
		t.Errorf("never started: ExitStatus = %d", got)
	}
}

// Signal reaches the whole process group Group gave the child: the grandchild dies too, and the child's status
// says which signal ended it. Both hold the write end of the child's stdout pipe, so reading it to the end
// returns only once both are gone.
func TestGroupSignal(t *testing.T) {
	c := child("parent")
	Group(c)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	if _, err := r.ReadString('\n'); err != nil { // the grandchild runs
		t.Fatal(err)
	}
	if err := Signal(c, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(eof) }()
	select {
	case <-eof:
	case <-time.After(time.Minute):
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		t.Fatal("the grandchild outlived the signal: it did not reach the process group")
	}
	c.Wait()
	if got := ExitStatus(c); got != 128+int(syscall.SIGTERM) {
		t.Errorf("ExitStatus after SIGTERM = %d", got)
	}
}
