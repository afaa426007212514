// Package fetch rebuilds a checkpoint's state, or one lost piece of it, from its custody
// holders: it reads the custody object and its holders from the chain, downloads any k
// pieces in parallel from the holders' public servers (streaming, each checked against
// its registered root) and hands them to custody.Rebuild or custody.RebuildPiece. The
// sidecar's resume and `depinchaind job fetch` rebuild states; the storage role repairs
// pieces.
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
	return f.fromHolders(ctx, o, o.Layout.Pieces(), func(readers []io.Reader) error {
		return custody.Rebuild(o.Layout, o.Roots, readers, out)
	})
}

// RebuildPiece writes piece target of the object to out (at its offsets in the piece),
// rebuilt from DataPieces other pieces streamed at once from their holders as Rebuild
// does, through custody.RebuildPiece: the repair of one lost piece, memory a few blocks
// per piece whatever the state's size. custody.ErrWrongParity (the registered parity
// piece is not the parity of the state the data pieces make) is returned as it is, the
// holders' pieces being right.
func (f Fetcher) RebuildPiece(ctx context.Context, o Object, target uint32, out io.WriterAt) error {
	if target >= o.Layout.Pieces() {
		return fmt.Errorf("custody object %s has pieces 0..%d, not %d", o.DatasetID, o.Layout.Pieces()-1, target)
	}
	return f.fromHolders(ctx, o, target, func(readers []io.Reader) error {
		return custody.RebuildPiece(o.Layout, o.Roots, readers, target, out)
	})
}

// fromHolders runs use on DataPieces pieces (never piece skip) streamed from their
// holders, trying again without a holder whose piece failed until it succeeds or fewer
// than k pieces are left.
func (f Fetcher) fromHolders(ctx context.Context, o Object, skip uint32, use func([]io.Reader) error) error {
	bad := map[source]bool{}
	var failures []error
	for {
		chosen := make([]source, 0, o.Layout.DataPieces)
		for i, holders := range o.Holders {
			if len(chosen) == int(o.Layout.DataPieces) {
				break
			}
			if uint32(i) == skip {
				continue
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
		err := f.attempt(ctx, o, chosen, use)
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

// attempt opens the chosen pieces' downloads and hands them to use.
func (f Fetcher) attempt(ctx context.Context, o Object, chosen []source, use func([]io.Reader) error) error {
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
	return use(readers)
}

// Piece streams piece `piece` of the object from the first of holders that serves its
// exact bytes into out (at their offsets in the piece), hashing them on the way: bytes
// off the piece's registered root or size are refused and the next holder is asked. It
// fails with every holder's error when none served the piece.
func (f Fetcher) Piece(ctx context.Context, o Object, piece uint32, holders []string, out io.WriterAt) error {
	if piece >= o.Layout.Pieces() {
		return fmt.Errorf("custody object %s has pieces 0..%d, not %d", o.DatasetID, o.Layout.Pieces()-1, piece)
	}
	size := int64(o.Layout.PieceBytes(piece))
	var failures []error
	for _, h := range holders {
		err := func() error {
			body, err := f.open(ctx, o, source{piece, h})
			if err != nil {
				return err
			}
			defer body.Close()
			// One byte more than the piece is read, so a longer body is caught.
			w := io.NewOffsetWriter(out, 0)
			root, _, err := merkle.StreamRoot(io.TeeReader(io.LimitReader(body, size+1), w), custody.ChunkSize)
			if err != nil {
				return err
			}
			if n, _ := w.Seek(0, io.SeekCurrent); n != size {
				return fmt.Errorf("%w: %d bytes, the piece is %d", custody.ErrRootMismatch, n, size)
			}
			if root != o.Roots[piece] {
				return fmt.Errorf("%w: root %x, registered %x", custody.ErrRootMismatch, root[:], o.Roots[piece][:])
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures = append(failures, fmt.Errorf("custody object %s piece %d from %s: %w", o.DatasetID, piece, h, err))
	}
	return errors.Join(append([]error{fmt.Errorf("%w: no holder of %s's piece %d served it", ErrNotEnoughHolders, o.DatasetID, piece)}, failures...)...)
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
