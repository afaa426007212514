// Package fetch rebuilds a checkpoint's state from its custody holders: it reads the
// custody object and its holders from the chain, downloads any k pieces in parallel from
// the holders' public servers (streaming, each checked against its registered root) and
// hands them to custody.Rebuild. The sidecar's resume and `depinchaind job fetch` use it.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// ShardQuerier reads custody objects; shardtypes.QueryClient satisfies it.
type ShardQuerier interface {
	Dataset(ctx context.Context, in *shardtypes.QueryDatasetRequest, opts ...grpc.CallOption) (*shardtypes.QueryDatasetResponse, error)
	Shard(ctx context.Context, in *shardtypes.QueryShardRequest, opts ...grpc.CallOption) (*shardtypes.QueryShardResponse, error)
}

// Object is a custody object as the chain has it: the checkpoint it holds, its layout,
// every piece's root and the operators holding each piece now.
type Object struct {
	DatasetID string
	Custody   shardtypes.CustodyInfo
	Layout    custody.Layout
	Roots     []merkle.Hash
	// Holders[i] are the holders of piece i's active replicas.
	Holders [][]string
}

// Live is how many pieces have a holder; the state can be rebuilt from holders while it
// is at least Layout.DataPieces.
func (o Object) Live() int {
	n := 0
	for _, h := range o.Holders {
		if len(h) > 0 {
			n++
		}
	}
	return n
}

// Locate reads the custody object of checkpoint (lease, index) from the chain.
func Locate(ctx context.Context, q ShardQuerier, leaseID, index uint64) (Object, error) {
	o, err := LocateObject(ctx, q, shardtypes.CustodyDatasetID(leaseID, index))
	if err != nil {
		return Object{}, fmt.Errorf("checkpoint %d/%d: %w", leaseID, index, err)
	}
	return o, nil
}

// LocateObject reads custody object id from the chain: a checkpoint state's, or a
// training-together round's pseudo-gradient or global state file.
func LocateObject(ctx context.Context, q ShardQuerier, id string) (Object, error) {
	ds, err := q.Dataset(ctx, &shardtypes.QueryDatasetRequest{DatasetId: id})
	if err != nil {
		return Object{}, fmt.Errorf("custody object %s: %w", id, err)
	}
	if ds.Dataset.Custody == nil {
		return Object{}, fmt.Errorf("dataset %s is not a custody object", id)
	}
	sh, err := q.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: id, Index: 0})
	if err != nil {
		return Object{}, fmt.Errorf("custody object %s: %w", id, err)
	}
	l, err := custody.NewLayout(ds.Dataset.TotalSize, ds.Dataset.Encoding.DataPieces, ds.Dataset.Encoding.ParityPieces)
	if err != nil {
		return Object{}, err
	}
	if len(sh.Shard.Pieces) != int(l.Pieces()) {
		return Object{}, fmt.Errorf("custody object %s has %d pieces, its layout %d", id, len(sh.Shard.Pieces), l.Pieces())
	}
	o := Object{DatasetID: id, Custody: *ds.Dataset.Custody, Layout: l, Roots: make([]merkle.Hash, l.Pieces()), Holders: make([][]string, l.Pieces())}
	for i, p := range sh.Shard.Pieces {
		if o.Roots[i], err = merkle.HashFromBytes(p.Piece.Root); err != nil {
			return Object{}, fmt.Errorf("custody object %s piece %d: %w", id, i, err)
		}
	}
	for _, r := range sh.Replicas {
		if r.Status == shardtypes.REPLICA_STATUS_ACTIVE && int(r.Piece) < len(o.Holders) {
			o.Holders[r.Piece] = append(o.Holders[r.Piece], r.Holder)
		}
	}
	return o, nil
}

// Fetcher downloads pieces from holders' public servers (GET <endpoint>/pieces/<dataset>/0/<piece>).
type Fetcher struct {
	Client *http.Client
	// Endpoint returns the public URL a holder registered (x/stakingext).
	Endpoint func(ctx context.Context, holder string) (string, error)
	// Authorize signs a request for the piece servers' access control; nil sends it bare.
	Authorize func(*http.Request) error
	// Progress, when set, is told of every byte of piece data read and of every piece
	// read to its end.
	Progress func(bytes int64, pieceDone bool)
}

// ErrNotEnoughHolders: fewer than k pieces could be fetched intact.
var ErrNotEnoughHolders = errors.New("custody: not enough pieces could be fetched from their holders")

type source struct {
	piece  uint32
	holder string
}

// Rebuild writes the object's state to out: it streams DataPieces pieces at once, one
// per piece from its first holder not yet found wanting, into custody.Rebuild, which
// checks each against its root and the state's data pieces against theirs. A holder that
// cannot be reached or serves wrong bytes is dropped and the rebuild starts again with
// the others; it fails with ErrNotEnoughHolders once fewer than k pieces are left.
func (f Fetcher) Rebuild(ctx context.Context, o Object, out io.WriterAt) error {
	bad := map[source]bool{}
	var failures []error
	for {
		chosen := make([]source, 0, o.Layout.DataPieces)
		for i, holders := range o.Holders {
			if len(chosen) == int(o.Layout.DataPieces) {
				break
			}
			for _, h := range holders {
				if s := (source{uint32(i), h}); !bad[s] {
					chosen = append(chosen, s)
					break
				}
			}
		}
		if len(chosen) < int(o.Layout.DataPieces) {
			return errors.Join(append([]error{fmt.Errorf("%w: %s needs %d of its %d pieces, %d have a holder that served them",
				ErrNotEnoughHolders, o.DatasetID, o.Layout.DataPieces, o.Layout.Pieces(), len(chosen))}, failures...)...)
		}
		err := f.attempt(ctx, o, chosen, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures = append(failures, err)
		var pe *custody.PieceError
		if errors.As(err, &pe) {
			for _, s := range chosen {
				if s.piece == pe.Index {
					bad[s] = true
				}
			}
			continue
		}
		if errors.Is(err, custody.ErrRootMismatch) {
			// A parity piece used is not the parity of the data; which one cannot be told,
			// so none of the parity holders used is asked again.
			for _, s := range chosen {
				if s.piece >= o.Layout.DataPieces {
					bad[s] = true
				}
			}
			continue
		}
		return err
	}
}

// attempt opens the chosen pieces' downloads and rebuilds from them.
func (f Fetcher) attempt(ctx context.Context, o Object, chosen []source, out io.WriterAt) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readers := make([]io.Reader, o.Layout.Pieces())
	bodies := make([]io.Closer, 0, len(chosen))
	defer func() {
		for _, b := range bodies {
			b.Close()
		}
	}()
	type opened struct {
		body io.ReadCloser
		err  error
	}
	results := make([]opened, len(chosen))
	done := make(chan struct{})
	var pending atomic.Int32
	pending.Store(int32(len(chosen)))
	for i, s := range chosen {
		go func() {
			body, err := f.open(ctx, o, s)
			results[i] = opened{body, err}
			if pending.Add(-1) == 0 {
				close(done)
			}
		}()
	}
	<-done
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, &custody.PieceError{Index: chosen[i].piece, Err: fmt.Errorf("from %s: %w", chosen[i].holder, r.err)})
			continue
		}
		bodies = append(bodies, r.body)
		readers[chosen[i].piece] = &progressReader{r: r.body, size: int64(o.Layout.PieceBytes(chosen[i].piece)), progress: f.Progress}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return custody.Rebuild(o.Layout, o.Roots, readers, out)
}

// open starts the download of one piece from one holder.
func (f Fetcher) open(ctx context.Context, o Object, s source) (io.ReadCloser, error) {
	endpoint, err := f.Endpoint(ctx, s.holder)
	if err != nil {
		return nil, err
	}
	u, err := PieceURL(endpoint, o.DatasetID, s.piece)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if f.Authorize != nil {
		if err := f.Authorize(req); err != nil {
			return nil, err
		}
	}
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", u, res.Status)
	}
	return res.Body, nil
}

// PieceURL is where the holder whose public URL is endpoint serves piece of a custody
// object (provider/pieces.Route).
func PieceURL(endpoint, datasetID string, piece uint32) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint %q is not an http(s) URL", endpoint)
	}
	return u.JoinPath("pieces", datasetID, "0", strconv.FormatUint(uint64(piece), 10)).String(), nil
}

// progressReader reports what is read through it, and the end of its piece.
type progressReader struct {
	r        io.Reader
	size     int64
	read     int64
	progress func(int64, bool)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if p.progress != nil && n > 0 {
		p.read += int64(n)
		p.progress(int64(n), p.read == p.size)
	}
	return n, err
}

// Source is where a checkpoint's state is rebuilt from: its custody object on chain and
// the holders' piece servers.
type Source struct {
	Shards  ShardQuerier
	Fetcher Fetcher
}

// Rebuild locates checkpoint (lease, index)'s custody object and writes its state to out
// from any k holders; it fails without fetching when fewer than k pieces are held.
func (s Source) Rebuild(ctx context.Context, leaseID, index uint64, out io.WriterAt) (Object, error) {
	return s.RebuildObject(ctx, shardtypes.CustodyDatasetID(leaseID, index), out)
}

// RebuildObject writes custody object id's file to out from any k holders; it fails
// without fetching when fewer than k pieces are held.
func (s Source) RebuildObject(ctx context.Context, id string, out io.WriterAt) (Object, error) {
	obj, err := LocateObject(ctx, s.Shards, id)
	if err != nil {
		return obj, err
	}
	if obj.Live() < int(obj.Layout.DataPieces) {
		return obj, fmt.Errorf("%w: %s has %d pieces held, %d are needed", ErrNotEnoughHolders, obj.DatasetID, obj.Live(), obj.Layout.DataPieces)
	}
	return obj, s.Fetcher.Rebuild(ctx, obj, out)
}
