//go:build !long

package main_test

// longTests is false outside -tags long (see longtests_on_test.go).
const longTests = false
