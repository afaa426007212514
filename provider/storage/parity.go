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

// proveRegisteredParityFault runs when a repair rebuilt parity piece target of a
// custody object from the (root-checked) data and the result does not match the
// registered root: the trainer registered a parity piece that is not the parity of its
// state. The role gets the registered bytes from the trainer or a holder of the piece
// (checked against the root) and proves the fault. state is the rebuilt state. Without
// the registered bytes there is nothing to open against the root, and the fault is only
// reported.
func (r *Role) proveRegisteredParityFault(ctx context.Context, info *shardInfo, l custody.Layout, roots []merkle.Hash, replicas []types.Replica, target uint32, state []byte) error {
	sources := append([]string{info.Custody.Trainer}, pieces.ActiveHolders(replicas, r.opts.Operator)[target]...)
	var failures []error
	for _, holder := range sources {
		registered, err := r.download.Download(ctx, info, holder, target)
		if err == nil {
			return r.proveParityFault(ctx, info, l, roots, target, state, registered)
		}
		failures = append(failures, err)
	}
	return errors.Join(append([]error{fmt.Errorf("custody object %s: parity piece %d is not the parity of the state, and no holder serves its registered bytes to prove it", info.DatasetID, target)}, failures...)...)
}

// proveParityFault finds the first chunk of registered, the bytes of parity piece
// target that match its registered root, that differs from the parity of state (a
// state checked against its data pieces' roots) and sends MsgProveParityFault, which
// convicts the trainer.
func (r *Role) proveParityFault(ctx context.Context, info *shardInfo, l custody.Layout, roots []merkle.Hash, target uint32, state, registered []byte) error {
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
