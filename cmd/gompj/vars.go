package main

import "gompj/node"

func nodeVariables() [][2]string { return node.Variables }
