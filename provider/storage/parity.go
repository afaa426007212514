package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
)

// proveParityFault runs when a parity piece target of a custody object rebuilt from data
// pieces that match their roots does not match the piece's registered root (a repair, or
// the check of a parity piece the trainer served): the trainer registered a parity piece
// that is not the parity of its state. The role streams the registered bytes from the trainer or a holder of the piece
// (checked against the root) and the state from the holders into temporary files beside
// path, finds the first chunk that differs and sends MsgProveParityFault, which convicts
// the trainer. Without the registered bytes there is nothing to open against the root,
// and the fault is only reported. (Fetching the state again costs a second download of
// k pieces, only when a trainer cheated; memory stays a few blocks per piece.)
func (r *Role) proveParityFault(ctx context.Context, obj fetch.Object, target uint32, path string) error {
	temp := func(what string) (*os.File, error) {
		f, err := os.CreateTemp(filepath.Dir(path), ".parity-fault-"+what+"-*")
		if err == nil {
			os.Remove(f.Name()) //nolint:errcheck // unlinked now, gone when closed
		}
		return f, err
	}
	registered, err := temp("piece")
	if err != nil {
		return err
	}
	defer registered.Close()
	sources := obj.Holders[target]
	if !slices.Contains(sources, obj.Custody.Trainer) {
		sources = append([]string{obj.Custody.Trainer}, sources...)
	}
	if err := r.custody.Piece(ctx, obj, target, sources, registered); err != nil {
		return errors.Join(fmt.Errorf("custody object %s: parity piece %d is not the parity of the state, and no holder serves its registered bytes to prove it", obj.DatasetID, target), err)
	}
	state, err := temp("state")
	if err != nil {
		return err
	}
	defer state.Close()
	if err := r.custody.Rebuild(ctx, obj, state); err != nil {
		return fmt.Errorf("custody object %s: rebuilding the state to prove parity piece %d wrong: %w", obj.DatasetID, target, err)
	}
	msg, err := fetch.ParityFault(r.opts.Operator, obj, state, target, registered)
	if err != nil {
		return err
	}
	if msg == nil {
		return fmt.Errorf("custody object %s: the registered parity piece %d is the parity of the state, but the rebuilt one does not match its root", obj.DatasetID, target)
	}
	if _, err := r.submit(ctx, msg); err != nil {
		return fmt.Errorf("custody object %s: proving parity piece %d's chunk %d wrong: %w", obj.DatasetID, target, msg.Chunk, err)
	}
	r.log.Warn("proved a parity fault: the trainer registered parity that is not the parity of its state",
		"dataset", obj.DatasetID, "piece", target, "chunk", msg.Chunk, "trainer", obj.Custody.Trainer)
	return nil
}
