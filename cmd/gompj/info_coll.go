package main

import "gompj/collectives"

// The collective algorithm table printed by `gompj info`.
func init() { collectiveTable = collectives.Describe }
