module gompj

go 1.26.8

require (
	github.com/vmihailenco/msgpack/v5 v5.4.1
	golang.org/x/sys v0.49.0
)

require (
	github.com/stretchr/testify v1.10.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
