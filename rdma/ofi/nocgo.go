//go:build ofi && !cgo

package ofi

// The ofi provider is cgo: a build with -tags ofi and CGO_ENABLED=0 stops here, naming what is missing.
var _ = the_ofi_tag_needs_cgo__set_CGO_ENABLED_1_and_install_a_C_compiler_and_libfabric_dev
