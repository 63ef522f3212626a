// Package env defines every GOMPJ_* environment variable gompj knows, once: its name, the node.Config field it
// fills (if any), its type, its default, its meaning, whether every node process of a job must agree on it, and
// how a starter treats it. Everything that reads or shows the environment works from these definitions: node's
// Config (FromEnv, defaults, `gompj info`), the collectives' algorithm table, `gompj help env`, and the launcher
// (what it sets for each node process, what it passes on over ssh, what it warns about). Adding a variable is one
// entry in vars.go, plus a Config field when it configures a job.
//
// Job is the contract between a starter (`gompj run`, the test harness, a user's script) and the node processes
// it starts: the identity variables of one node process.
//
// Imports: the standard library only. It sits below every other gompj package, so that node and collectives
// (which may not import node) both read it.
package env
