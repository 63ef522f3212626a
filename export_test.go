package gompj

import "github.com/gompj/gompj/ranks"

// RanksComm exposes a communicator's rank-layer form to the package's external tests.
func RanksComm(c *Comm) *ranks.Comm { return c.c }
