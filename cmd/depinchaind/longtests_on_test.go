//go:build long

package main_test

// longTests turns on the slow parts of tests that also run short in `make test`.
const longTests = true
