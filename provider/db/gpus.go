package db

import "path/filepath"

// OutputDir is the folder the lease's trainer writes its checkpoints and
// metrics to.
func (r LeaseRecord) OutputDir() string { return filepath.Join(r.Dir, "output") }

// TakenGPUs maps each GPU serving an active lease to the lease, and each
// reserved by an open bid to 0: the GPUs neither a bid nor a lease may take.
func (t *Tx) TakenGPUs() (map[string]uint64, error) {
	taken := map[string]uint64{}
	bids, err := t.Bids()
	if err != nil {
		return nil, err
	}
	for _, b := range bids {
		if b.Status == BidPlaced {
			for _, u := range b.GPUs {
				taken[u] = 0
			}
		}
	}
	leases, err := t.Leases()
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		if l.Status == LeaseActive {
			for _, u := range l.GPUs {
				taken[u] = l.LeaseID
			}
		}
	}
	return taken, nil
}
