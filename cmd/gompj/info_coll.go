package main

import "github.com/gompj/gompj/collectives"

// The collective algorithm table printed by `gompj info`.
func init() { collectiveTable = collectives.Describe }
