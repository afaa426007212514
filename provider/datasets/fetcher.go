// Package datasets gets the training data of a dataset-backed job for the
// worker a lease serves: the data pieces of the shards x/shardregistry
// assigns to that worker, downloaded from the providers that hold them,
// each checked against its registered Merkle root, a missing or corrupt
// data piece rebuilt from any k intact pieces of its shard (Reed–Solomon),
// and written into the lease's data folder (the trainer's DEPIN_DATA_DIR)
// as one file per piece, named so that the folder's files in byte order of
// their names are x/verify's DatasetLayout: the stream the chain's referee
// checks a disputed step against.
//
// The Fetcher is no role: it has no events to follow. The leases role calls
// Prepare before it starts a trainer; the bidding role calls Fetchable, a
// cheap chain check, before it bids; the disputes role calls WorkerStream to
// re-execute and dispute another provider's steps.
package datasets

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/pieces"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// AssignmentEpoch is the shard-assignment epoch a job's training stream is
// drawn from: x/verify's referee checks every worker's stream against epoch
// 0's assignment, so every lease of a worker slot trains on the same shards.
const AssignmentEpoch = 0

// Registry is what the fetcher reads from x/shardregistry;
// types.QueryClient satisfies it.
type Registry interface {
	Dataset(ctx context.Context, in *types.QueryDatasetRequest, opts ...grpc.CallOption) (*types.QueryDatasetResponse, error)
	Shard(ctx context.Context, in *types.QueryShardRequest, opts ...grpc.CallOption) (*types.QueryShardResponse, error)
	Shards(ctx context.Context, in *types.QueryShardsRequest, opts ...grpc.CallOption) (*types.QueryShardsResponse, error)
	Assignment(ctx context.Context, in *types.QueryAssignmentRequest, opts ...grpc.CallOption) (*types.QueryAssignmentResponse, error)
}

// Options configure a Fetcher.
type Options struct {
	// Registry reads datasets, shards, their holders and assignments.
	Registry Registry
	// Providers reads the holders' registered endpoints.
	Providers pieces.ProviderQuerier
	// Fetch downloads a piece from a holder; nil uses pieces.HTTPFetcher
	// with http.DefaultClient and pieces.DefaultFetchTimeout.
	Fetch pieces.Fetcher
	// Logger receives the fetcher's logs; nil discards them.
	Logger *slog.Logger
	// StreamCacheBytes bounds what the shard-set folders WorkerStream keeps under its
	// cacheDir hold together: beyond it the least recently used are removed. 0 keeps
	// them all.
	StreamCacheBytes int64
}

// Fetcher assembles workers' training data. Create it with New; it is safe
// for concurrent use.
type Fetcher struct {
	opts     Options
	log      *slog.Logger
	download pieces.Downloader
	// inUse counts, per shard-set folder, the WorkerStream calls reading it: eviction
	// leaves them alone.
	mu    sync.Mutex
	inUse map[string]int
}

// New checks opts and returns a Fetcher.
func New(opts Options) (*Fetcher, error) {
	if opts.Registry == nil || opts.Providers == nil {
		return nil, errors.New("datasets: needs the shard registry's and the providers' queries")
	}
	if opts.Fetch == nil {
		opts.Fetch = pieces.HTTPFetcher(nil, pieces.DefaultFetchTimeout)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Fetcher{
		opts: opts, log: opts.Logger.With("component", "datasets"),
		download: pieces.Downloader{Endpoints: pieces.NewEndpoints(opts.Providers), Fetch: opts.Fetch},
		inUse:    map[string]int{},
	}, nil
}

// ErrNotFetchable means a job's training data cannot be had now: its
// dataset is not registered, or one of its shards has fewer than k pieces
// (one copy, for replicas) that holders have claimed, or could not be
// downloaded and rebuilt intact.
var ErrNotFetchable = errors.New("the job's training data cannot be fetched")

// Fetchable reports, without downloading anything, whether job's dataset
// can be fetched: it is registered and every shard has at least as many
// live pieces (claimed by an active holder) as it needs to be read, k of
// k+m under Reed–Solomon, one under replicas. Every shard is checked, since
// a bid does not know which worker slot it will fill.
func (f *Fetcher) Fetchable(ctx context.Context, job markettypes.Job) error {
	id := job.Spec.DatasetId
	if id == "" {
		return nil
	}
	var next []byte
	var count uint32
	for {
		res, err := f.opts.Registry.Shards(ctx, &types.QueryShardsRequest{DatasetId: id, Pagination: &query.PageRequest{Key: next, Limit: 200}})
		if err != nil {
			return fmt.Errorf("%w: reading the shards of dataset %q: %v", ErrNotFetchable, id, err)
		}
		for _, sh := range res.Shards {
			if sh.Live < sh.MinLive {
				return fmt.Errorf("%w: shard %d of dataset %q has %d live pieces and needs %d: too few holders to read it",
					ErrNotFetchable, sh.Index, id, sh.Live, sh.MinLive)
			}
			count++
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		next = res.Pagination.NextKey
	}
	if count == 0 {
		return fmt.Errorf("%w: dataset %q has no shards", ErrNotFetchable, id)
	}
	return nil
}

// Result says what Prepare did.
type Result struct {
	// Reused is set when dir already held the complete, verified stream.
	Reused bool
	// Files are the data files written (or found), in stream order.
	Files []string
	// Size is the stream's length in bytes.
	Size uint64
	// Refused are the downloads whose bytes did not match their piece's
	// registered root.
	Refused []pieces.FetchError
	// Rebuilt counts the data pieces rebuilt from other pieces of their
	// shard (Reed–Solomon) because no holder served them intact.
	Rebuilt int
}

// file is one data file of a worker's stream: a data piece of an assigned shard.
type file struct {
	name  string
	shard *pieces.Shard
	piece uint32
	seg   traindata.Segment
	// holders are the shard's active holders, by piece.
	holders map[uint32][]string
}

// FileName names the seq-th data file of a stream, the data piece `piece`
// of shard `shard`: the zero-padded sequence number first, so byte order of
// the names is stream order.
func FileName(seq int, shard, piece uint32) string {
	return fmt.Sprintf("%06d-shard%d-piece%d", seq, shard, piece)
}

// Prepare writes the training stream of worker `worker` of the dataset-backed
// job into dir, atomically: it is assembled in a temporary folder beside dir
// and renamed into place, so dir is either the complete, verified stream or
// what it was before. A dir that already holds the complete stream (a
// restarted sidecar) is reused after its files are checked against their
// roots. With too few intact pieces of a shard the error is ErrNotFetchable
// and says which shard, which pieces and which holders failed.
func (f *Fetcher) Prepare(ctx context.Context, job markettypes.Job, worker uint32, dir string) (Result, error) {
	files, err := f.plan(ctx, job, worker)
	if err != nil {
		return Result{}, err
	}
	return f.fetchInto(ctx, files, dir, fmt.Sprintf("job %d worker %d dataset %q", job.Id, worker, job.Spec.DatasetId))
}

// ErrNoShardInRound means a round of a job that trains in rounds gives the worker slot
// no shard of the dataset: the slot sits that round out.
var ErrNoShardInRound = errors.New("the round assigns the worker no shard")

// PrepareRound writes the training stream of worker `worker` of a dataset-backed job
// that trains in rounds, in round `round`, into dir as Prepare does: the data pieces of
// the shards the round assigns the slot (types.AssignRoundShards, x/verify's referee's
// rule), each checked against its root. A round that gives the slot no shard is
// ErrNoShardInRound.
func (f *Fetcher) PrepareRound(ctx context.Context, job markettypes.Job, worker uint32, round uint64, dir string) (Result, error) {
	id := job.Spec.DatasetId
	if id == "" || job.Spec.Sync == nil {
		return Result{}, fmt.Errorf("job %d does not train in rounds on a dataset", job.Id)
	}
	dsRes, err := f.opts.Registry.Dataset(ctx, &types.QueryDatasetRequest{DatasetId: id})
	if err != nil {
		return Result{}, fmt.Errorf("reading dataset %q: %w", id, err)
	}
	shards, err := roundShards(job, dsRes.Dataset, worker, round)
	if err != nil {
		return Result{}, err
	}
	files, err := f.planShards(ctx, dsRes.Dataset, shards)
	if err != nil {
		return Result{}, err
	}
	return f.fetchInto(ctx, files, dir, fmt.Sprintf("job %d worker %d round %d dataset %q", job.Id, worker, round, id))
}

// roundShards are the shards of ds that round `round` of a job that trains in rounds
// assigns worker: types.AssignRoundShards, x/verify's referee's rule. None is
// ErrNoShardInRound.
func roundShards(job markettypes.Job, ds types.Dataset, worker uint32, round uint64) ([]uint32, error) {
	a, err := types.AssignRoundShards(job.Seed, round, ds.ShardCount, job.Spec.Workers)
	if err != nil {
		return nil, err
	}
	if worker >= uint32(len(a)) || len(a[worker]) == 0 {
		return nil, fmt.Errorf("%w: round %d of job %d, worker %d (%d shards of dataset %q over %d workers)",
			ErrNoShardInRound, round, job.Id, worker, ds.ShardCount, ds.Id, job.Spec.Workers)
	}
	return a[worker], nil
}

// WorkerStream is the training stream of worker at step of a dataset-backed job, the
// one x/verify's referee proves the worker's steps against: the data pieces of the
// shards assigned to it in epoch AssignmentEpoch, or for a job that trains in rounds in
// the step's round, each checked against its root. It is what a verifier re-executes
// another provider's steps on. The pieces are fetched into a folder under cacheDir named
// by the dataset and the shard set (shardSetDir), where every later stream over the same
// shards finds them (checked against their roots again, not downloaded again). A shard
// that cannot be had intact is an error that names the dataset and the shard.
func (f *Fetcher) WorkerStream(ctx context.Context, job markettypes.Job, worker uint32, step uint64, cacheDir string) (traindata.Stream, error) {
	id := job.Spec.DatasetId
	if id == "" {
		return traindata.Stream{}, fmt.Errorf("job %d names no dataset", job.Id)
	}
	dsRes, err := f.opts.Registry.Dataset(ctx, &types.QueryDatasetRequest{DatasetId: id})
	if err != nil {
		return traindata.Stream{}, fmt.Errorf("reading dataset %q: %w", id, err)
	}
	ds := dsRes.Dataset
	var shards []uint32
	what := fmt.Sprintf("job %d worker %d dataset %q", job.Id, worker, id)
	if job.Spec.Sync != nil {
		sync, err := verifytypes.JobSync(job)
		if err != nil {
			return traindata.Stream{}, err
		}
		round := sync.RoundOf(step)
		shards, err = roundShards(job, ds, worker, round)
		what = fmt.Sprintf("job %d worker %d round %d dataset %q", job.Id, worker, round, id)
		if err != nil {
			return traindata.Stream{}, err
		}
	} else if shards, err = f.assignedShards(ctx, job, worker); err != nil {
		return traindata.Stream{}, err
	}
	dir, err := shardSetDir(cacheDir, ds.Id, shards)
	if err != nil {
		return traindata.Stream{}, err
	}
	files, err := f.planShards(ctx, ds, shards)
	if err != nil {
		return traindata.Stream{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return traindata.Stream{}, err
	}
	f.use(dir, 1)
	defer f.use(dir, -1)
	if _, err := f.fetchInto(ctx, files, dir, what); err != nil {
		return traindata.Stream{}, err
	}
	// The folder's time is when it was last used: the least recently used go first.
	now := time.Now()
	if err := os.Chtimes(dir, now, now); err != nil {
		return traindata.Stream{}, err
	}
	raw, err := exact.ReadStreamDir(dir)
	if err != nil {
		return traindata.Stream{}, err
	}
	if err := f.evictStreams(cacheDir); err != nil {
		// The stream is in hand; the cache is trimmed again on the next call.
		f.log.Warn("could not trim the dataset cache", "dir", cacheDir, "err", err)
	}
	segs := make([]traindata.Segment, len(files))
	for i, fl := range files {
		segs[i] = fl.seg
	}
	return traindata.NewStream(traindata.NewLayout(segs), raw)
}

// shardSetDir is the folder under cacheDir that WorkerStream keeps the data pieces of
// shards of dataset id in: one per dataset, and in it one per shard set, named by a hash
// of the set (a worker may be assigned thousands of shards).
func shardSetDir(cacheDir, id string, shards []uint32) (string, error) {
	if err := types.ValidateDatasetID(id); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range shards {
		h.Write(binary.BigEndian.AppendUint32(nil, s))
	}
	return filepath.Join(cacheDir, id, fmt.Sprintf("shards-%x", h.Sum(nil)[:12])), nil
}

// use adds delta to the count of WorkerStream calls reading the shard-set folder dir.
func (f *Fetcher) use(dir string, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inUse[dir] += delta; f.inUse[dir] == 0 {
		delete(f.inUse, dir)
	}
}

// evictStreams removes the least recently used shard-set folders under cacheDir (of
// every dataset) until what they hold together is at most Options.StreamCacheBytes,
// never one a WorkerStream call is reading. Folders being assembled (hidden, see
// fetchInto) are neither counted nor removed.
func (f *Fetcher) evictStreams(cacheDir string) error {
	if f.opts.StreamCacheBytes <= 0 {
		return nil
	}
	type shardSet struct {
		dir  string
		used time.Time
		size int64
	}
	var sets []shardSet
	var total int64
	dirs, err := filepath.Glob(filepath.Join(cacheDir, "*", "shards-*"))
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil {
			return err
		}
		size, err := dirSize(dir)
		if err != nil {
			return err
		}
		sets = append(sets, shardSet{dir: dir, used: info.ModTime(), size: size})
		total += size
	}
	slices.SortFunc(sets, func(a, b shardSet) int { return a.used.Compare(b.used) })
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range sets {
		if total <= f.opts.StreamCacheBytes {
			break
		}
		if f.inUse[s.dir] > 0 {
			continue
		}
		if err := os.RemoveAll(s.dir); err != nil {
			return err
		}
		total -= s.size
		f.log.Info("dataset cache: least recently used shard set removed", "dir", s.dir, "bytes", s.size,
			"cache_bytes", total, "bound", f.opts.StreamCacheBytes)
	}
	return nil
}

// dirSize is the size of the regular files directly in dir.
func dirSize(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var size int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, err
		}
		size += info.Size()
	}
	return size, nil
}

// PrepareWhole writes every shard of a dataset into dir the way Prepare writes
// a worker's: its data pieces in shard order, each checked against its root,
// missing ones rebuilt from parity. A fine-tuning job's initial weights are
// such a dataset (a safetensors file), and every worker starts from all of it.
func (f *Fetcher) PrepareWhole(ctx context.Context, datasetID, dir string) (Result, error) {
	dsRes, err := f.opts.Registry.Dataset(ctx, &types.QueryDatasetRequest{DatasetId: datasetID})
	if err != nil {
		return Result{}, fmt.Errorf("reading dataset %q: %w", datasetID, err)
	}
	all := make([]uint32, dsRes.Dataset.ShardCount)
	for i := range all {
		all[i] = uint32(i)
	}
	files, err := f.planShards(ctx, dsRes.Dataset, all)
	if err != nil {
		return Result{}, err
	}
	return f.fetchInto(ctx, files, dir, fmt.Sprintf("dataset %q", datasetID))
}

// fetchInto fetches files into dir atomically (see Prepare); what names the
// data for logs.
func (f *Fetcher) fetchInto(ctx context.Context, files []file, dir, what string) (Result, error) {
	var res Result
	for _, fl := range files {
		res.Files = append(res.Files, fl.name)
		res.Size += fl.seg.Size
	}
	if complete(dir, files) {
		res.Reused = true
		f.log.Info("training data already in place", "data", what, "files", len(files), "bytes", res.Size)
		return res, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // gone after the rename
	for start := 0; start < len(files); {
		// The files of one shard are fetched together: a missing data piece
		// is rebuilt from the others.
		end := start + 1
		for end < len(files) && files[end].shard == files[start].shard {
			end++
		}
		if err := f.fetchShard(ctx, tmp, files[start:end], &res); err != nil {
			sh := files[start].shard
			return Result{}, fmt.Errorf("could not fetch dataset %q shard %d: %w", sh.DatasetID, sh.Shard.Index, err)
		}
		start = end
	}
	if err := syncDir(tmp); err != nil {
		return Result{}, err
	}
	if err := replaceDir(tmp, dir); err != nil {
		return Result{}, err
	}
	f.log.Info("training data fetched", "data", what,
		"files", len(files), "bytes", res.Size, "refused", len(res.Refused), "rebuilt", res.Rebuilt)
	return res, nil
}

// plan reads the worker's assignment and its shards and returns the data
// files of its stream in order, with the segment of x/verify's DatasetLayout
// each must match.
func (f *Fetcher) plan(ctx context.Context, job markettypes.Job, worker uint32) ([]file, error) {
	id := job.Spec.DatasetId
	if id == "" {
		return nil, fmt.Errorf("job %d names no dataset", job.Id)
	}
	shards, err := f.assignedShards(ctx, job, worker)
	if err != nil {
		return nil, err
	}
	dsRes, err := f.opts.Registry.Dataset(ctx, &types.QueryDatasetRequest{DatasetId: id})
	if err != nil {
		return nil, fmt.Errorf("reading dataset %q: %w", id, err)
	}
	return f.planShards(ctx, dsRes.Dataset, shards)
}

// assignedShards are the shards of its dataset that x/shardregistry assigns worker of
// job in epoch AssignmentEpoch.
func (f *Fetcher) assignedShards(ctx context.Context, job markettypes.Job, worker uint32) ([]uint32, error) {
	asg, err := f.opts.Registry.Assignment(ctx, &types.QueryAssignmentRequest{JobId: job.Id, Epoch: AssignmentEpoch})
	if err != nil {
		return nil, fmt.Errorf("reading the shard assignment of job %d: %w", job.Id, err)
	}
	i := slices.IndexFunc(asg.Workers, func(w types.WorkerAssignment) bool { return w.Worker == worker })
	if i < 0 || len(asg.Workers[i].Shards) == 0 {
		return nil, fmt.Errorf("%w: dataset %q assigns no shard to worker %d of job %d", ErrNotFetchable, job.Spec.DatasetId, worker, job.Id)
	}
	return asg.Workers[i].Shards, nil
}

// planShards returns the data files of the given shards of ds in order, with
// the segment of x/verify's DatasetLayout each must match.
func (f *Fetcher) planShards(ctx context.Context, ds types.Dataset, indexes []uint32) ([]file, error) {
	id := ds.Id
	var shards []*pieces.Shard
	var chainShards []types.Shard
	holders := map[*pieces.Shard]map[uint32][]string{}
	for _, index := range indexes {
		shRes, err := f.opts.Registry.Shard(ctx, &types.QueryShardRequest{DatasetId: id, Index: index})
		if err != nil {
			return nil, fmt.Errorf("reading shard %d of dataset %q: %w", index, id, err)
		}
		sh := pieces.ShardOf(ds, shRes.Shard)
		shards = append(shards, sh)
		chainShards = append(chainShards, sh.Shard)
		holders[sh] = pieces.ActiveHolders(shRes.Replicas, "")
	}
	layout, err := verifytypes.DatasetLayout(ds, chainShards)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotFetchable, err)
	}
	var files []file
	for _, sh := range shards {
		data := 1
		if sh.Encoding.IsReedSolomon() {
			data = int(sh.Encoding.DataPieces)
		}
		for p := range uint32(data) {
			files = append(files, file{name: FileName(len(files), sh.Shard.Index, p), shard: sh, piece: p, holders: holders[sh]})
		}
	}
	if len(files) != len(layout.Segments) {
		return nil, fmt.Errorf("%d data pieces, but the layout has %d segments", len(files), len(layout.Segments))
	}
	for n := range files {
		files[n].seg = layout.Segments[n]
	}
	return files, nil
}

// fetchShard writes the data files of one shard into dir: each data piece
// downloaded from a holder whose bytes match its root, and when the data
// pieces cannot all be had that way, the missing ones rebuilt from any k
// intact pieces (parity included). Refused downloads are logged with the
// holder that served them.
func (f *Fetcher) fetchShard(ctx context.Context, dir string, files []file, res *Result) error {
	sh := files[0].shard
	holders := files[0].holders
	have := make([][]byte, len(sh.Shard.Pieces))
	sources := make([]uint32, len(sh.Shard.Pieces))
	for i := range sources {
		sources[i] = uint32(i) // data pieces first: no rebuild when they are intact
	}
	// First every data piece; when some cannot be had intact, parity pieces
	// until k are in hand to rebuild them from.
	need, k := len(files), int(sh.Encoding.MinLive())
	n, failures := f.download.Gather(ctx, sh, have, sources[:need], holders, need)
	if n < need && n < k && len(sources) > need {
		m, more := f.download.Gather(ctx, sh, have, sources[need:], holders, k-n)
		n += m
		failures = append(failures, more...)
	}
	for _, err := range failures {
		var fe *pieces.FetchError
		if errors.As(err, &fe) && fe.Refused {
			res.Refused = append(res.Refused, *fe)
			f.log.Warn("piece refused: the bytes a holder served do not match the registered root",
				"dataset", sh.DatasetID, "shard", sh.Shard.Index, "piece", fe.Piece, "holder", fe.Holder, "err", fe.Err)
		} else {
			f.log.Info("piece download failed; trying other holders and pieces", "dataset", sh.DatasetID, "shard", sh.Shard.Index, "err", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n < k && slices.ContainsFunc(files, func(fl file) bool { return have[fl.piece] == nil }) {
		var intact []uint32
		for i, b := range have {
			if b != nil {
				intact = append(intact, uint32(i))
			}
		}
		err := fmt.Errorf("%w: shard %d of dataset %q: %d of its %d pieces could be had intact (%v), %s needs %d",
			ErrNotFetchable, sh.Shard.Index, sh.DatasetID, len(intact), len(sh.Shard.Pieces), intact, sh.Encoding.Describe(), sh.Encoding.MinLive())
		return errors.Join(append([]error{err}, failures...)...)
	}
	for _, fl := range files {
		data := have[fl.piece]
		if data == nil {
			rebuilt, err := sh.RebuildPiece(have, fl.piece)
			if err != nil {
				if errors.Is(err, manifest.ErrNotEnoughPieces) {
					err = fmt.Errorf("%w: %v", ErrNotFetchable, err)
				}
				return fmt.Errorf("shard %d of dataset %q, data piece %d: %w", sh.Shard.Index, sh.DatasetID, fl.piece, err)
			}
			data = rebuilt
			res.Rebuilt++
			f.log.Info("data piece rebuilt from other pieces of its shard", "dataset", sh.DatasetID, "shard", sh.Shard.Index, "piece", fl.piece)
		}
		// The layout's root is what the referee checks; the piece's registered
		// root is the same hash, checked again here against the layout.
		if merkle.RootOfBytes(data, int(fl.seg.ChunkSize)) != fl.seg.Root || uint64(len(data)) != fl.seg.Size {
			return fmt.Errorf("shard %d piece %d does not match its segment of the training layout", sh.Shard.Index, fl.piece)
		}
		if err := writeFile(filepath.Join(dir, fl.name), data); err != nil {
			return err
		}
	}
	return nil
}

// complete reports whether dir holds exactly the stream's files, each
// matching its segment's size and root.
func complete(dir string, files []file) bool {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != len(files) {
		return false
	}
	for i, e := range entries { // ReadDir sorts by name, as the trainer does
		fl := files[i]
		if e.Name() != fl.name || !e.Type().IsRegular() {
			return false
		}
		fh, err := os.Open(filepath.Join(dir, fl.name))
		if err != nil {
			return false
		}
		root, _, err := merkle.StreamRoot(fh, int(fl.seg.ChunkSize))
		info, statErr := fh.Stat()
		fh.Close()
		if err != nil || statErr != nil || uint64(info.Size()) != fl.seg.Size || root != fl.seg.Root {
			return false
		}
	}
	return true
}

// writeFile writes data to path and syncs it.
func writeFile(path string, data []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// replaceDir puts the folder tmp at dir: a rename, after moving aside
// whatever dir held (an empty folder, or an incomplete or stale stream).
func replaceDir(tmp, dir string) error {
	if err := os.Rename(tmp, dir); err == nil {
		return syncDir(filepath.Dir(dir))
	} else if _, statErr := os.Stat(dir); statErr != nil {
		return err
	}
	old, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old-")
	if err != nil {
		return err
	}
	aside := filepath.Join(old, "data")
	if err := os.Rename(dir, aside); err != nil {
		os.Remove(old) //nolint:errcheck // best effort
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return errors.Join(err, os.Rename(aside, dir))
	}
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}
