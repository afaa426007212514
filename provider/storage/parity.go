package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// proveParityFault runs when a repair rebuilt parity piece target of a custody object
// from the (root-checked) data and the result does not match the registered root: the
// trainer registered a parity piece that is not the parity of its state. The role gets
// the registered bytes from the trainer or a holder of the piece (checked against the
// root), finds the first chunk that differs and sends MsgProveParityFault, which
// convicts the trainer. state is the rebuilt state. Without the registered bytes there
// is nothing to open against the root, and the fault is only reported.
func (r *Role) proveParityFault(ctx context.Context, info *shardInfo, l custody.Layout, roots []merkle.Hash, replicas []types.Replica, target uint32, state []byte) error {
	sources := append([]string{info.Custody.Trainer}, pieces.ActiveHolders(replicas, r.opts.Operator)[target]...)
	var registered []byte
	var failures []error
	for _, holder := range sources {
		data, err := r.download.Download(ctx, info, holder, target)
		if err == nil {
			registered = data
			break
		}
		failures = append(failures, err)
	}
	if registered == nil {
		return errors.Join(append([]error{fmt.Errorf("custody object %s: parity piece %d is not the parity of the state, and no holder serves its registered bytes to prove it", info.DatasetID, target)}, failures...)...)
	}
	obj := fetch.Object{DatasetID: info.DatasetID, Custody: *info.Custody, Layout: l, Roots: roots}
	msg, err := fetch.ParityFault(r.opts.Operator, obj, bytes.NewReader(state), target, bytes.NewReader(registered))
	if err != nil {
		return err
	}
	if msg == nil {
		return fmt.Errorf("custody object %s: the registered parity piece %d is the parity of the state, but the rebuilt one does not match its root", info.DatasetID, target)
	}
	if _, err := r.submit(ctx, msg); err != nil {
		return fmt.Errorf("custody object %s: proving parity piece %d's chunk %d wrong: %w", info.DatasetID, target, msg.Chunk, err)
	}
	r.log.Warn("proved a parity fault: the trainer registered parity that is not the parity of its state",
		"dataset", info.DatasetID, "piece", target, "chunk", msg.Chunk, "trainer", info.Custody.Trainer)
	return nil
}
