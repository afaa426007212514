package workload

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// fakeMarket answers Job queries from a fixed map, as a node's gRPC does.
type fakeMarket struct {
	*markettypes.UnimplementedQueryServer
	jobs map[uint64]markettypes.Job
}

func (f fakeMarket) Job(_ context.Context, req *markettypes.QueryJobRequest) (*markettypes.QueryJobResponse, error) {
	j, ok := f.jobs[req.JobId]
	if !ok {
		return nil, markettypes.ErrJobNotFound.Wrapf("job %d", req.JobId)
	}
	return &markettypes.QueryJobResponse{Job: j}, nil
}

// serveMarket starts a gRPC server with the market query service on a free
// local port and returns its address.
func serveMarket(t *testing.T, jobs map[uint64]markettypes.Job) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ForceServerCodec(codec.NewProtoCodec(codectypes.NewInterfaceRegistry()).GRPCCodec()))
	markettypes.RegisterQueryServer(srv, fakeMarket{UnimplementedQueryServer: &markettypes.UnimplementedQueryServer{}, jobs: jobs})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// `run --job ID` trains the job's spec with the job's seed, as read from a
// node, and prints the roots exact computes for them.
func TestWorkloadRunTrainsAJobFromTheChain(t *testing.T) {
	spec, err := markettypes.ParseJobSpecYAML([]byte(tinySpec))
	require.NoError(t, err)
	withData := spec
	withData.DatasetId = "wiki-en"
	container, err := markettypes.ParseJobSpecYAML([]byte(specYAML("  kind: container\n  image: example/trainer:1\n  digest: sha256:" + strings.Repeat("ab", 32))))
	require.NoError(t, err)
	seed := []byte("a seed the chain drew for job 7")
	addr := serveMarket(t, map[uint64]markettypes.Job{
		7: {Id: 7, Spec: spec, Seed: seed},
		8: {Id: 8, Spec: container, Seed: seed},
		9: {Id: 9, Spec: withData, Seed: seed},
	})
	node := []string{"--grpc-addr", addr, "--grpc-insecure"}
	dir := t.TempDir()
	p := parseRun(t, mustExecute(t, append([]string{"run", "--job", "7", "--steps", "3", "--out", filepath.Join(dir, "job7")}, node...)...))
	s, err := exact.Init(tinyConfig(), seed)
	require.NoError(t, err)
	roots, _ := exactSteps(t, s, seed, traindata.BuiltinCorpus(), 3)
	require.Equal(t, roots[0].Hex(), p.h0)
	require.Equal(t, map[uint64]string{1: roots[1].Hex(), 2: roots[2].Hex(), 3: roots[3].Hex()}, p.roots)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job", "8"}, "--job 8: workload.kind is container"},
		{[]string{"--job", "9"}, `job 9 trains on dataset "wiki-en": give its data with --dataset-dir`},
		{[]string{"--job", "10"}, "--job 10: querying the node"},
		{[]string{"--job", "7", "--seed", "00"}, "--seed and --job: give one"},
		{[]string{"--job", "7", "--spec", "job.yaml"}, "--spec and --job: give one"},
	} {
		_, _, err := execute(t, append(append([]string{"run", "--steps", "1", "--out", filepath.Join(dir, "x")}, tc.args...), node...)...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}
