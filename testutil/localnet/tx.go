package localnet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// TxResult is the outcome of a transaction once it is in a block (or rejected before).
type TxResult struct {
	Hash   string
	Height int64
	Code   uint32
	RawLog string
	Events []Event
}

// Event is an ABCI event as the CLI prints it.
type Event struct {
	Type       string `json:"type"`
	Attributes []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"attributes"`
}

// Attr returns the first value of an attribute of the first event of a type.
func (r TxResult) Attr(eventType, key string) (string, bool) {
	for _, e := range r.Events {
		if e.Type != eventType {
			continue
		}
		for _, a := range e.Attributes {
			if a.Key == key {
				return a.Value, true
			}
		}
	}
	return "", false
}

type txResponse struct {
	TxHash string  `json:"txhash"`
	Height string  `json:"height"`
	Code   uint32  `json:"code"`
	RawLog string  `json:"raw_log"`
	Events []Event `json:"events"`
}

// Tx signs and broadcasts `depinchaind tx <args> --from from` and waits until the
// transaction is in a block. An error means the CLI refused to build or broadcast it
// (CheckTx failures included); a delivered but failed transaction has Code != 0.
func (n *Node) Tx(ctx context.Context, from string, args ...string) (TxResult, error) {
	full := append([]string{"tx"}, args...)
	full = append(full, "--from", from, "--keyring-backend", "test", "--chain-id", n.ChainID, "--node", n.RPC,
		"--yes", "--output", "json", "--gas", "auto", "--gas-adjustment", "1.5", "--broadcast-mode", "sync")
	out, err := n.Exec(ctx, full...)
	if err != nil {
		return TxResult{}, err
	}
	var sync txResponse
	if err := json.Unmarshal([]byte(out), &sync); err != nil {
		return TxResult{}, fmt.Errorf("decoding broadcast response %q: %w", out, err)
	}
	if sync.Code != 0 {
		return TxResult{Hash: sync.TxHash, Code: sync.Code, RawLog: sync.RawLog}, nil
	}
	return n.WaitTx(ctx, sync.TxHash)
}

// WaitTx polls for a transaction until it is included in a block.
func (n *Node) WaitTx(ctx context.Context, hash string) (TxResult, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var resp txResponse
		if err := n.Query(ctx, &resp, "tx", hash, "--node", n.RPC); err == nil && resp.Height != "" && resp.Height != "0" {
			var height int64
			fmt.Sscan(resp.Height, &height)
			return TxResult{Hash: resp.TxHash, Height: height, Code: resp.Code, RawLog: resp.RawLog, Events: resp.Events}, nil
		}
		select {
		case <-ctx.Done():
			return TxResult{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return TxResult{}, fmt.Errorf("transaction %s not included within 30s", hash)
}
