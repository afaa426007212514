package status_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/status"
	statusv1 "github.com/depinchain/depinchain/provider/status/v1"
)

// fakeService answers with fixed data.
type fakeService struct {
	statusv1.UnimplementedStatusServiceServer
}

var (
	fixedStatus = &statusv1.StatusResponse{
		Version:            "v0.1.0-test",
		ChainId:            "depinchain-test-1",
		Operator:           "depin1operator",
		HotKey:             "depin1hotkey",
		StartedAt:          timestamppb.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		CursorHeight:       100,
		ChainHeight:        103,
		CursorLag:          3,
		WebsocketConnected: true,
		Ready:              true,
		Runtimes:           []string{"process"},
		Roles:              []string{"provider", "verifier"},
		JobsSeen:           12,
		BidsPlaced:         5,
		LeasesActive:       1,
		// CheckpointsSubmitted, CheckpointsFinalized, LastError, NotReady and
		// MissingGrants stay zero: REST must still show them.
	}
	fixedGPUs = &statusv1.GPUsResponse{
		Driver: "mock:dgxh100",
		Gpus: []*statusv1.GPU{{
			Index: 0, Uuid: "GPU-aaaa", Name: "NVIDIA H100 80GB HBM3", Model: "H100-SXM5-80GB",
			MemoryMib: 81559, UtilizationPercent: 97, Healthy: true, LeaseId: 7,
		}},
	}
	fixedCheckpoints = &statusv1.CheckpointsResponse{Checkpoints: []*statusv1.Checkpoint{
		{LeaseId: 7, Index: 0, StartStep: 0, EndStep: 99, StateRoot: "ab01", TraceRoot: "cd02", FinalHash: "ef03", TxHash: "AA11", Height: 90, Status: "finalized"},
		{LeaseId: 7, Index: 1, StartStep: 100, EndStep: 199, StateRoot: "ab11", TraceRoot: "cd12", FinalHash: "ef13", Height: 101, Status: "submitted"},
	}}
)

func (fakeService) Status(context.Context, *statusv1.StatusRequest) (*statusv1.StatusResponse, error) {
	return fixedStatus, nil
}

func (fakeService) GPUs(context.Context, *statusv1.GPUsRequest) (*statusv1.GPUsResponse, error) {
	return fixedGPUs, nil
}

func (fakeService) Leases(context.Context, *statusv1.LeasesRequest) (*statusv1.LeasesResponse, error) {
	return &statusv1.LeasesResponse{}, nil
}

func (fakeService) Checkpoints(_ context.Context, req *statusv1.CheckpointsRequest) (*statusv1.CheckpointsResponse, error) {
	if req.GetLeaseId() != 7 {
		return nil, grpcstatus.Errorf(codes.NotFound, "lease %d not found", req.GetLeaseId())
	}
	return fixedCheckpoints, nil
}

// readiness is a Ready func a test can change.
type readiness struct {
	mu      sync.Mutex
	reasons []string
}

func (r *readiness) set(reasons ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = reasons
}

func (r *readiness) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reasons
}

// started is a server serving on a loopback port.
type started struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, opts status.Options, mount func(*status.Server)) *started {
	t.Helper()
	if opts.Service == nil {
		opts.Service = fakeService{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	srv, err := status.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if mount != nil {
		mount(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return s
}

func (s *started) get(t *testing.T, path string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func (s *started) grpcClient(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestGRPC(t *testing.T) {
	s := start(t, status.Options{}, nil)
	client := statusv1.NewStatusServiceClient(s.grpcClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	st, err := client.Status(ctx, &statusv1.StatusRequest{})
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !proto.Equal(st, fixedStatus) {
		t.Errorf("Status over gRPC = %v, want %v", st, fixedStatus)
	}
	gpus, err := client.GPUs(ctx, &statusv1.GPUsRequest{})
	if err != nil || !proto.Equal(gpus, fixedGPUs) {
		t.Errorf("GPUs over gRPC = %v, %v", gpus, err)
	}
	cps, err := client.Checkpoints(ctx, &statusv1.CheckpointsRequest{LeaseId: 7})
	if err != nil || !proto.Equal(cps, fixedCheckpoints) {
		t.Errorf("Checkpoints over gRPC = %v, %v", cps, err)
	}
	_, err = client.Checkpoints(ctx, &statusv1.CheckpointsRequest{LeaseId: 8})
	if grpcstatus.Code(err) != codes.NotFound {
		t.Errorf("Checkpoints of an unknown lease: %v, want NotFound", err)
	}
	_, err = client.Jobs(ctx, &statusv1.JobsRequest{})
	if grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("unimplemented Jobs: %v", err)
	}
}

func TestGRPCReflection(t *testing.T) {
	s := start(t, status.Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(s.grpcClient(t)).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "depinchain.provider.v1.StatusService") {
		t.Errorf("reflection lists %v", names)
	}
	_ = stream.CloseSend()
}

func TestREST(t *testing.T) {
	s := start(t, status.Options{}, nil)

	code, ctype, body := s.get(t, "/v1/status")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("GET /v1/status: %d %s %s", code, ctype, body)
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("GET /v1/status: %v: %s", err, body)
	}
	// snake_case names, int64s as strings (proto3 JSON), zero values present.
	for name, want := range map[string]any{
		"chain_id":              "depinchain-test-1",
		"hot_key":               "depin1hotkey",
		"cursor_height":         "100",
		"websocket_connected":   true,
		"started_at":            "2026-03-01T12:00:00Z",
		"checkpoints_finalized": "0",
		"checkpoints_submitted": "0",
		"last_error":            "",
	} {
		if got, ok := fields[name]; !ok || got != want {
			t.Errorf("/v1/status %s = %#v (present %v), want %#v", name, got, ok, want)
		}
	}
	for _, name := range []string{"not_ready", "missing_grants"} {
		if got, ok := fields[name].([]any); !ok || len(got) != 0 {
			t.Errorf("/v1/status %s = %#v, want []", name, fields[name])
		}
	}
	if _, ok := fields["chainId"]; ok {
		t.Error("/v1/status uses camelCase names")
	}
	// And it is the same data as over gRPC.
	var st statusv1.StatusResponse
	if err := protojson.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&st, fixedStatus) {
		t.Errorf("Status over REST = %v, want %v", &st, fixedStatus)
	}

	code, _, body = s.get(t, "/v1/leases/7/checkpoints")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/leases/7/checkpoints: %d %s", code, body)
	}
	var cps statusv1.CheckpointsResponse
	if err := protojson.Unmarshal(body, &cps); err != nil || !proto.Equal(&cps, fixedCheckpoints) {
		t.Errorf("checkpoints over REST = %v, %v; body %s", &cps, err, body)
	}
	for _, want := range []string{`"lease_id":"7"`, `"start_step":"0"`, `"index":"0"`, `"tx_hash":""`, `"final_hash":"ef03"`} {
		if !strings.Contains(compact(t, body), want) {
			t.Errorf("checkpoints JSON lacks %s: %s", want, body)
		}
	}

	code, _, body = s.get(t, "/v1/leases/8/checkpoints")
	if code != http.StatusNotFound || !strings.Contains(string(body), "lease 8 not found") {
		t.Errorf("GET /v1/leases/8/checkpoints: %d %s", code, body)
	}
	code, _, body = s.get(t, "/v1/leases")
	if code != http.StatusOK || compact(t, body) != `{"leases":[]}` {
		t.Errorf("GET /v1/leases: %d %s", code, body)
	}
	code, _, _ = s.get(t, "/v1/nope")
	if code != http.StatusNotFound {
		t.Errorf("GET /v1/nope: %d", code)
	}
}

func compact(t *testing.T, body []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestHealthAndReadiness(t *testing.T) {
	r := &readiness{}
	s := start(t, status.Options{Ready: r.get}, nil)

	code, _, body := s.get(t, "/healthz")
	if code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("GET /healthz: %d %q", code, body)
	}
	code, ctype, body := s.get(t, "/readyz")
	if code != http.StatusOK || ctype != "application/json" || compact(t, body) != `{"ready":true,"reasons":[]}` {
		t.Errorf("GET /readyz when ready: %d %s %s", code, ctype, body)
	}

	r.set("cursor 40 blocks behind the chain", "missing grant /depinchain.market.v1.MsgPlaceBid")
	code, _, body = s.get(t, "/readyz")
	var got struct {
		Ready   bool     `json:"ready"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if code != http.StatusServiceUnavailable || got.Ready || len(got.Reasons) != 2 ||
		got.Reasons[1] != "missing grant /depinchain.market.v1.MsgPlaceBid" {
		t.Errorf("GET /readyz when not ready: %d %s", code, body)
	}
	// Health does not depend on readiness.
	if code, _, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz when not ready: %d", code)
	}
	// No metrics registry, no /metrics.
	if code, _, _ := s.get(t, "/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics without a registry: %d", code)
	}
}

func TestNilReadyIsReady(t *testing.T) {
	s := start(t, status.Options{}, nil)
	if code, _, body := s.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz with no Ready: %d %s", code, body)
	}
}

func TestMetrics(t *testing.T) {
	m := metrics.New("test-host")
	s := start(t, status.Options{Metrics: m.Registry()}, nil)
	gpus := []gpu.GPU{
		{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UtilizationPercent: 97, TemperatureCelsius: 61, PowerMilliwatts: 650000},
		{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UtilizationPercent: 3},
		{Index: 2, UUID: "GPU-cccc", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, XIDs: []uint64{48}, Problems: []string{"xid 48"}},
	}
	m.ObserveGPUs(gpus, nil, func(uuid string) uint64 {
		if uuid == "GPU-aaaa" {
			return 7
		}
		return 0
	})
	m.SetChainHeight(103)
	m.SetCursorHeight(100)

	code, _, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	text := string(body)
	for _, want := range []struct {
		name  string
		pairs []string
		value string
	}{
		{"DCGM_FI_DEV_GPU_UTIL", []string{`gpu="0"`, `UUID="GPU-aaaa"`, `modelName="NVIDIA H100 80GB HBM3"`, `Hostname="test-host"`}, "97"},
		{"DCGM_FI_DEV_GPU_UTIL", []string{`gpu="1"`, `UUID="GPU-bbbb"`}, "3"},
		{"DCGM_FI_DEV_GPU_TEMP", []string{`UUID="GPU-aaaa"`}, "61"},
		{"DCGM_FI_DEV_POWER_USAGE", []string{`UUID="GPU-aaaa"`}, "650"},
		{"DCGM_FI_DEV_FB_TOTAL", []string{`UUID="GPU-cccc"`}, "81559"},
		{"DCGM_FI_DEV_XID_ERRORS", []string{`UUID="GPU-cccc"`}, "48"},
		{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", []string{`UUID="GPU-aaaa"`}, "0"},
		{"DCGM_FI_DEV_MEM_COPY_UTIL", []string{`UUID="GPU-aaaa"`}, "0"},
		{"depinprovider_gpu_healthy", []string{`UUID="GPU-cccc"`, `model="H100-80GB-HBM3"`}, "0"},
		{"depinprovider_gpu_leased", []string{`UUID="GPU-aaaa"`}, "7"},
		{"depinprovider_cursor_lag_blocks", nil, "3"},
	} {
		if line := findSeries(text, want.name, want.pairs...); line == "" {
			t.Errorf("/metrics has no %s%v", want.name, want.pairs)
		} else if v := line[strings.LastIndex(line, " ")+1:]; v != want.value {
			t.Errorf("%s = %s, want %s", line, v, want.value)
		}
	}

	// GPU-bbbb vanishes from NVML: its series go with it.
	m.ObserveGPUs([]gpu.GPU{gpus[0], gpus[2]}, nil, nil)
	_, _, body = s.get(t, "/metrics")
	text = string(body)
	if line := findSeries(text, "DCGM_FI_DEV_GPU_UTIL", `UUID="GPU-bbbb"`); line != "" {
		t.Errorf("vanished GPU still exported: %s", line)
	}
	if strings.Contains(text, "GPU-bbbb") {
		t.Error("vanished GPU still named in /metrics")
	}
	if findSeries(text, "DCGM_FI_DEV_GPU_UTIL", `UUID="GPU-aaaa"`) == "" {
		t.Error("remaining GPU no longer exported")
	}
}

// findSeries returns the exposition line of name's series having every
// label pair, or "".
func findSeries(text, name string, pairs ...string) string {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, p := range pairs {
			if !strings.Contains(line, p) {
				ok = false
			}
		}
		if ok {
			return line
		}
	}
	return ""
}

func TestMountedHandler(t *testing.T) {
	s := start(t, status.Options{}, func(srv *status.Server) {
		srv.Handle("GET /debug/hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		}))
	})
	if code, _, body := s.get(t, "/debug/hello"); code != http.StatusOK || string(body) != "hello" {
		t.Errorf("GET /debug/hello: %d %s", code, body)
	}
}

func TestStopsWhenContextEnds(t *testing.T) {
	s := start(t, status.Options{}, nil)
	if code, _, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz: %d", code)
	}
	// A gRPC connection open at shutdown must not hold it up.
	client := statusv1.NewStatusServiceClient(s.grpcClient(t))
	if _, err := client.Status(context.Background(), &statusv1.StatusRequest{}); err != nil {
		t.Fatal(err)
	}

	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
		s.done <- err // for the cleanup
	case <-time.After(status.ShutdownTimeout + 5*time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		t.Error("still accepting connections after shutdown")
	}
}

func TestListenAndServeFailsOnBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, err := status.New(status.Options{Service: fakeService{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.ListenAndServe(ctx, ln.Addr().String()); err == nil {
		t.Error("ListenAndServe on a busy address returned nil")
	}
}

func TestNewRequiresService(t *testing.T) {
	if _, err := status.New(status.Options{}); err == nil {
		t.Error("New without a service returned no error")
	}
}
