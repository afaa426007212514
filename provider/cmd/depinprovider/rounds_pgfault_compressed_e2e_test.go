package main_test

import (
	"strings"
	"testing"
)

// TestSidecarsProveAFabricatedCompressedPseudoGradient is
// TestSidecarsProveAFabricatedPseudoGradient on the top_k: 64 job: the cheater's round-0
// record has one sent value off while its error buffer roots and end state are honest.
// The honest trainers compress G_0 − its end state from the zero error buffer as it must,
// find the wrong record and prove it (the chain's reason names the record); the rest
// (exclusion, slash, reward, pay, Simulate's globals with top_k) is as the dense test's.
func TestSidecarsProveAFabricatedCompressedPseudoGradient(t *testing.T) {
	if !strings.Contains(compressedRoundsJobYAML, "top_k: 64") {
		t.Fatal("the compressed job spec has no top_k")
	}
	excluded := testSidecarsProveAFabricatedPseudoGradient(t, compressedRoundsJobYAML)
	if !strings.Contains(excluded["reason"], "record") {
		t.Fatalf("the cheater was excluded for %q, want its record", excluded["reason"])
	}
}
