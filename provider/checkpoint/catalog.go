package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/depinchain/depinchain/provider/trainer"
)

// Ref names a checkpoint the way the chain does: the lease and the index of
// the checkpoint within it.
type Ref struct {
	LeaseID uint64
	Index   uint64
}

func (r Ref) String() string { return fmt.Sprintf("lease %d checkpoint %d", r.LeaseID, r.Index) }

// Errors of the Catalog.
var (
	ErrUnknownCheckpoint = errors.New("checkpoint: not retained")
	ErrNeededByDispute   = errors.New("checkpoint: needed by an open challenge")
)

// Entry is a retained checkpoint.
type Entry struct {
	Ref
	JobID uint64
	// Dir is the checkpoint folder (see package trainer).
	Dir        string
	Commitment Commitment
}

func (e Entry) statePath() string { return filepath.Join(e.Dir, trainer.StateFileName) }
func (e Entry) tracePath() string { return filepath.Join(e.Dir, trainer.TraceFileName) }

// record is an Entry with its retention state.
type record struct {
	Entry
	final   bool
	finalAt time.Time
	// challenges are the open challenges on this checkpoint, by chain id.
	challenges map[uint64]struct{}
}

// Catalog is the set of checkpoints a provider retains, which its HTTP
// server serves, together with the rules for letting them go. It keeps
// nothing on disk itself: the daemon records the same facts in its store and
// re-adds them after a restart.
//
// Prune removes a checkpoint's folder only when all of these hold:
//   - it is final, and was so for at least the retention period: until then
//     it can be challenged, and challengers and the owner download it;
//   - no open challenge is on it or on the checkpoint that continues from it
//     (same job, starting at its end step): answering a dispute over steps
//     a..b means recomputing states from the state at a;
//   - it is not the newest final checkpoint of a job the daemon has not
//     released: a job reopened after a lease ends resumes from that one,
//     downloaded from this server.
type Catalog struct {
	retention time.Duration

	mu      sync.Mutex
	records map[Ref]*record
	// released jobs no longer need their newest final checkpoint.
	released map[uint64]struct{}
}

// NewCatalog returns an empty catalog that keeps final checkpoints for
// retention before they may be pruned.
func NewCatalog(retention time.Duration) *Catalog {
	return &Catalog{retention: retention, records: map[Ref]*record{}, released: map[uint64]struct{}{}}
}

// Add starts retaining a checkpoint. Adding one already present is an
// error unless it is the same entry (the daemon replaying its store).
func (c *Catalog) Add(e Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.records[e.Ref]; ok {
		if old.Entry != e {
			return fmt.Errorf("checkpoint: %s is already retained with different contents", e.Ref)
		}
		return nil
	}
	c.records[e.Ref] = &record{Entry: e, challenges: map[uint64]struct{}{}}
	return nil
}

// Lookup returns the retained checkpoint ref.
func (c *Catalog) Lookup(ref Ref) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.records[ref]
	if !ok {
		return Entry{}, false
	}
	return r.Entry, true
}

// update applies change to the record of ref under the lock.
func (c *Catalog) update(ref Ref, change func(*record) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.records[ref]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownCheckpoint, ref)
	}
	return change(r)
}

// MarkFinal records that ref became final at time at; its retention period
// starts then. Marking it again keeps the first time.
func (c *Catalog) MarkFinal(ref Ref, at time.Time) error {
	return c.update(ref, func(r *record) error {
		if !r.final {
			r.final, r.finalAt = true, at
		}
		return nil
	})
}

// MarkDisputed records the open challenge challengeID on ref.
func (c *Catalog) MarkDisputed(ref Ref, challengeID uint64) error {
	return c.update(ref, func(r *record) error {
		r.challenges[challengeID] = struct{}{}
		return nil
	})
}

// MarkResolved records that challenge challengeID on ref is over.
func (c *Catalog) MarkResolved(ref Ref, challengeID uint64) error {
	return c.update(ref, func(r *record) error {
		delete(r.challenges, challengeID)
		return nil
	})
}

// ReleaseJob records that no lease will resume job jobID (it completed, was
// cancelled or expired), so its newest final checkpoint is no longer kept
// for that.
func (c *Catalog) ReleaseJob(jobID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released[jobID] = struct{}{}
}

// Discard removes a checkpoint that will never become final (the chain
// rejected it, or its lease closed before it was committed) right away,
// unless an open challenge needs it.
func (c *Catalog) Discard(ref Ref) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.records[ref]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownCheckpoint, ref)
	}
	if neededByChallenge(r, c.challengedStarts()) {
		return fmt.Errorf("%w: %s", ErrNeededByDispute, ref)
	}
	if err := os.RemoveAll(r.Dir); err != nil {
		return err
	}
	delete(c.records, ref)
	return nil
}

// Prune removes the folders of the checkpoints the rules let go as of now
// and stops retaining them. It returns those it removed, in order; a folder
// it could not remove stays retained and its error is returned.
func (c *Catalog) Prune(now time.Time) ([]Ref, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	newestFinal := map[uint64]*record{} // by job
	for _, r := range c.records {
		if newest := newestFinal[r.JobID]; r.final && (newest == nil || r.Commitment.EndStep > newest.Commitment.EndStep) {
			newestFinal[r.JobID] = r
		}
	}
	challenged := c.challengedStarts()
	var pruned []Ref
	var errs []error
	for ref, r := range c.records {
		if !r.final || now.Before(r.finalAt.Add(c.retention)) || neededByChallenge(r, challenged) {
			continue
		}
		if _, released := c.released[r.JobID]; !released && newestFinal[r.JobID] == r {
			continue
		}
		if err := os.RemoveAll(r.Dir); err != nil {
			errs = append(errs, fmt.Errorf("pruning %s: %w", ref, err))
			continue
		}
		delete(c.records, ref)
		pruned = append(pruned, ref)
	}
	slices.SortFunc(pruned, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(a.LeaseID, b.LeaseID), cmp.Compare(a.Index, b.Index))
	})
	return pruned, errors.Join(errs...)
}

// jobStep is a step of a job's training.
type jobStep struct{ job, step uint64 }

// challengedStarts returns the start steps of the checkpoints with an open
// challenge. The caller holds c.mu.
func (c *Catalog) challengedStarts() map[jobStep]struct{} {
	starts := map[jobStep]struct{}{}
	for _, r := range c.records {
		if len(r.challenges) > 0 {
			starts[jobStep{r.JobID, r.Commitment.StartStep}] = struct{}{}
		}
	}
	return starts
}

// neededByChallenge reports whether an open challenge is on r or on a
// checkpoint continuing from r's state, given challengedStarts.
func neededByChallenge(r *record, challengedStarts map[jobStep]struct{}) bool {
	_, continuationChallenged := challengedStarts[jobStep{r.JobID, r.Commitment.EndStep}]
	return len(r.challenges) > 0 || continuationChallenged
}
