package node

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gompj/gompj/internal/env"
)

// fromSlurm fills the multi-node fields from the variables srun sets for each task, so that
// `srun -N 4 --ntasks-per-node=1 PROGRAM` needs no launcher. Each Slurm task is one gompj node process:
//
//	node id      SLURM_PROCID
//	nodes        SLURM_STEP_NUM_TASKS (else SLURM_NTASKS)
//	coordinator  the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), port GOMPJ_PORT or derived
//	             from SLURM_JOB_ID and SLURM_STEP_ID; task 0 serves it
//	ranks        GOMPJ_NP, else GOMPJ_RANKS_PER_NODE (else SLURM_CPUS_ON_NODE) per node
//	secret       GOMPJ_SECRET, else derived from the job id and the user's key file (see slurmSecret)
//
// It applies only under srun (SLURM_STEP_ID or SLURM_STEPID set) and only when GOMPJ_NODES is not set, so that
// `gompj run` (which sets GOMPJ_NODES for its children) works inside an allocation too.
func fromSlurm(c *Config, look env.Lookup) error {
	get := func(names ...string) (string, bool) {
		for _, n := range names {
			if v, ok := look(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v), true
			}
		}
		return "", false
	}
	if off, err := env.NoSlurm.On(look); off || err != nil {
		return err
	}
	step, ok := get("SLURM_STEP_ID", "SLURM_STEPID")
	if !ok || c.Nodes != 0 {
		return nil
	}
	if _, set := look(env.Nodes.Name); set {
		return nil
	}
	num := func(what string, names ...string) (int, error) {
		v, ok := get(names...)
		if !ok {
			return 0, fmt.Errorf("gompj: running under srun but %s is not set", names[0])
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("gompj: %s=%q (%s) is not a non-negative integer", names[0], v, what)
		}
		return n, nil
	}
	ntasks, err := num("node processes", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
	if err != nil {
		return err
	}
	procid, err := num("node id", "SLURM_PROCID")
	if err != nil {
		return err
	}
	if ntasks <= 1 {
		return nil // a one-task step is a one-box job
	}
	c.Nodes, c.NodeID = ntasks, procid
	c.setSource(env.Nodes.Name, "slurm")
	c.setSource(env.NodeID.Name, "slurm")
	if c.Ranks == 0 && c.RanksPerNode == 0 {
		if cpus, err := num("CPUs", "SLURM_CPUS_ON_NODE"); err == nil && cpus > 0 {
			c.RanksPerNode = cpus
			c.setSource(env.RanksPerNode.Name, "slurm")
		}
	}
	jobID, err := num("job id", "SLURM_JOB_ID", "SLURM_JOBID")
	if err != nil {
		return err
	}
	stepID, err := strconv.Atoi(step)
	if err != nil {
		stepID = 0 // "batch", "extern": not a numbered step
	}
	if c.Coordinator == "" {
		list, ok := get("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
		if !ok {
			return errors.New("gompj: running under srun but SLURM_STEP_NODELIST / SLURM_JOB_NODELIST is not set")
		}
		host, err := FirstHost(list)
		if err != nil {
			return err
		}
		port := 12000 + (jobID*7+stepID)%18000
		if p, ok := env.Port.Get(look); ok {
			if port, err = strconv.Atoi(p); err != nil || port <= 0 || port > 65535 {
				return fmt.Errorf("gompj: %s=%q is not a port", env.Port.Name, p)
			}
		}
		c.Coordinator = net.JoinHostPort(host, strconv.Itoa(port))
		c.ServeCoordinator = true
		c.setSource(env.Coordinator.Name, "slurm")
		c.setSource(env.CoordinatorServe.Name, "slurm")
	}
	if c.Secret == nil {
		s, err := slurmSecret(jobID, stepID, look)
		if err != nil {
			return err
		}
		c.Secret = s
		c.setSource(env.Secret.Name, "slurm")
	}
	return nil
}

// slurmSecret derives the job secret of a Slurm step from the user's key file, GOMPJ_KEY_FILE or
// ~/.gompj/key (created with mode 0600 on first use, atomically, so that tasks starting at once on a shared home
// directory agree). The secret is HMAC-SHA256(key, "gompj slurm <job>.<step>"): unique per step, and known only to
// whoever can read the key file (the user and root). The job id alone, which every user can see in squeue, is
// not enough.
func slurmSecret(jobID, stepID int, look env.Lookup) ([]byte, error) {
	path, ok := env.KeyFile.Get(look)
	if !ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("gompj: no GOMPJ_SECRET and no home directory for the Slurm key file: %w", err)
		}
		path = filepath.Join(home, ".gompj", "key")
	}
	key, err := readOrCreateKey(path)
	if err != nil {
		return nil, fmt.Errorf("gompj: no GOMPJ_SECRET, and the Slurm key file: %w", err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "gompj slurm %d.%d", jobID, stepID)
	return []byte(hex.EncodeToString(m.Sum(nil))), nil
}

func readOrCreateKey(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil {
		return checkKey(path, b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(hex.EncodeToString(raw) + "\n"); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// link is atomic, also on NFS: the first task to get here wins, the others read its key.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return checkKey(path, b)
}

func checkKey(path string, b []byte) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	k := []byte(strings.TrimSpace(string(b)))
	if len(k) < 16 {
		return nil, fmt.Errorf("%s holds %d bytes, at least 16 are needed", path, len(k))
	}
	return k, nil
}

// FirstHost returns the first host of a Slurm host list such as "node[01-04,07],gpu-a[1-2]" ("node01").
func FirstHost(list string) (string, error) {
	list = strings.TrimSpace(list)
	var b strings.Builder
	for i := 0; i < len(list); i++ {
		switch ch := list[i]; ch {
		case ',':
			if b.Len() == 0 {
				return "", fmt.Errorf("gompj: malformed Slurm node list %q", list)
			}
			return b.String(), nil
		case '[':
			end := strings.IndexByte(list[i:], ']')
			if end < 0 {
				return "", fmt.Errorf("gompj: malformed Slurm node list %q", list)
			}
			first := list[i+1 : i+end]
			first, _, _ = strings.Cut(first, ",")
			first, _, _ = strings.Cut(first, "-")
			if first == "" {
				return "", fmt.Errorf("gompj: malformed Slurm node list %q", list)
			}
			b.WriteString(first)
			i += end
		default:
			b.WriteByte(ch)
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("gompj: empty Slurm node list")
	}
	return b.String(), nil
}
