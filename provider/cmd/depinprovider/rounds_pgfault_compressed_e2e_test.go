package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	verifytypes "github.com/depinchain/depinchain/x/verify/types"
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
	_, _, excluded := testSidecarsProveAFabricatedPseudoGradient(t, compressedRoundsJobYAML, "--cheat-pseudo-gradient")
	if !strings.Contains(excluded["reason"], "record") {
		t.Fatalf("the cheater was excluded for %q, want its record", excluded["reason"])
	}
}

// TestSidecarsQueryAWrongErrorOut is TestSidecarsProveAFabricatedPseudoGradient on the
// top_k: 64 job with a cheater whose records are honest but whose round-0 header names an
// error buffer with one element off. No honest trainer can open that buffer's chunks, so
// each opens a file query on it (MsgOpenFileQuery); the cheater's own sidecar answers each
// descent (MsgAnswerFileQuery) down to the chunk that differs from the buffer the prover
// rebuilt, and the first prover's MsgProveRoundFault with that chunk convicts it.
func TestSidecarsQueryAWrongErrorOut(t *testing.T) {
	r, proof, excluded := testSidecarsProveAFabricatedPseudoGradient(t, compressedRoundsJobYAML, "--cheat-error-out")
	if !strings.Contains(excluded["reason"], "error buffer chunk") {
		t.Fatalf("the cheater was excluded for %q, want its error buffer", excluded["reason"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prover := proof.event(t, "depinchain.verify.v1.EventRoundFaultProven")["prover"]
	var opened []map[string]string
	for _, tx := range acceptedTxs(ctx, r.c.node, "/depinchain.verify.v1.MsgOpenFileQuery") {
		if ev := tx.event(t, "depinchain.verify.v1.EventFileQueryOpened"); ev["challenger"] == prover {
			opened = append(opened, ev)
		}
	}
	if len(opened) != 1 || opened[0]["file"] != verifytypes.ROUND_FILE_ERROR_OUT.String() || opened[0]["round"] != "0" ||
		opened[0]["worker"] != excluded["worker"] || opened[0]["provider"] != r.c.sidecars["w3"].Operator {
		t.Fatalf("the prover %s's file queries %v: want one, on the cheater's round-0 error_out", prover, opened)
	}
	if _, ok := acceptedTx(ctx, r.c.node, "/depinchain.verify.v1.MsgAnswerFileQuery"); !ok {
		t.Fatal("the cheater's sidecar answered no move of the file query")
	}
}
