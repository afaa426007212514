package disputes

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Datasets fetches the training stream of a worker of a dataset-backed job: the data
// pieces of its shards (of the step's round, for a job that trains in rounds), each
// checked against the chain's piece root, kept in a folder per dataset and shard set
// under cacheDir; *datasets.Fetcher satisfies it.
type Datasets interface {
	WorkerStream(ctx context.Context, job markettypes.Job, worker uint32, step uint64, cacheDir string) (traindata.Stream, error)
}

// datasetCacheDir is the folder under the work folder where fetched dataset pieces stay,
// so that the checkpoints of a lease, one after another, read them from disk.
const datasetCacheDir = "datasets"

// trainingData is the stream worker's steps of job around step read, the one the chain's
// referee proves them against: the chain's (verifytypes.WorkerTrainingData), or for a
// dataset-backed job the data pieces of the worker's shards fetched from their holders.
// The last dataset stream is kept in memory: a lease's checkpoints come one after another.
func (r *Role) trainingData(ctx context.Context, job markettypes.Job, worker uint32, step uint64) (traindata.Stream, error) {
	if job.Spec.DatasetId == "" {
		return verifytypes.WorkerTrainingData(job, worker, step)
	}
	if r.opts.Datasets == nil {
		return traindata.Stream{}, fmt.Errorf("job %d trains on dataset %q and this sidecar has no dataset fetcher", job.Id, job.Spec.DatasetId)
	}
	key := streamKey{job: job.Id, worker: worker}
	if job.Spec.Sync != nil {
		sync, err := verifytypes.JobSync(job)
		if err != nil {
			return traindata.Stream{}, err
		}
		key.round = sync.RoundOf(step)
	}
	r.mu.Lock()
	cached := r.stream
	r.mu.Unlock()
	if cached.data != nil && cached.key == key {
		return *cached.data, nil
	}
	data, err := r.opts.Datasets.WorkerStream(ctx, job, worker, step, filepath.Join(r.opts.WorkDir, datasetCacheDir))
	if err != nil {
		return traindata.Stream{}, fmt.Errorf("the training data of job %d worker %d at step %d: %w", job.Id, worker, step, err)
	}
	r.mu.Lock()
	r.stream = streamCache{key: key, data: &data}
	r.mu.Unlock()
	return data, nil
}

// streamKey names a worker's stream: per job and worker slot, and per round for a job
// that trains in rounds (0 otherwise).
type streamKey struct {
	job    uint64
	worker uint32
	round  uint64
}

// streamCache is the last dataset stream trainingData fetched.
type streamCache struct {
	key  streamKey
	data *traindata.Stream
}
