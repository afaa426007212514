// Package status serves the provider sidecar's observability surface on one
// listen address (config api.listen, DefaultListen by default):
//
//   - the StatusService (package provider/status/v1) over gRPC, with server
//     reflection, for grpcurl and programs;
//   - the same service as REST/JSON under /v1/... through an in-process
//     grpc-gateway v2 mux (snake_case field names, zero values shown);
//   - GET /healthz: 200 "ok" while the process serves;
//   - GET /readyz: 200 when Options.Ready reports no reasons, else 503 with
//     {"ready":false,"reasons":[...]};
//   - GET /metrics: Prometheus metrics, when Options.Metrics is set;
//   - whatever else the daemon mounts with Handle.
//
// gRPC and HTTP share the port: the HTTP server speaks HTTP/1.1 and
// unencrypted HTTP/2 (prior knowledge, as gRPC clients use), and sends
// requests whose Content-Type is application/grpc to the gRPC server.
// There is no TLS: the default address is loopback, and an operator who
// exposes it should put it behind a proxy that terminates TLS.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	statusv1 "github.com/depinchain/depinchain/provider/status/v1"
)

// DefaultListen is the status API's default address (config api.listen).
const DefaultListen = "127.0.0.1:8470"

// ShutdownTimeout bounds how long Serve waits, once its context ends, for
// requests in flight before it closes the remaining connections.
const ShutdownTimeout = 5 * time.Second

// Options configure a Server.
type Options struct {
	// Service answers the StatusService, over gRPC and REST. Required.
	// Implementations embed statusv1.UnimplementedStatusServiceServer.
	Service statusv1.StatusServiceServer
	// Ready returns why the sidecar is not ready; none means ready.
	// Nil means always ready. It is called on every GET /readyz.
	Ready func() []string
	// Metrics is served at /metrics; nil serves no /metrics.
	Metrics *prometheus.Registry
	// Logger receives the server's own messages; nil discards them.
	Logger *slog.Logger
	// GRPCOptions are passed to grpc.NewServer (e.g. interceptors).
	GRPCOptions []grpc.ServerOption
}

// Server is the status API's gRPC and HTTP server. Create it with New.
type Server struct {
	grpc  *grpc.Server
	mux   *http.ServeMux
	ready func() []string
	log   *slog.Logger
}

// New builds the server: it registers the service on a gRPC server (with
// reflection) and on the REST gateway, and mounts the health, readiness and
// metrics endpoints. Serve or ListenAndServe starts it.
func New(opts Options) (*Server, error) {
	if opts.Service == nil {
		return nil, errors.New("status: Options.Service is required")
	}
	s := &Server{
		grpc:  grpc.NewServer(opts.GRPCOptions...),
		mux:   http.NewServeMux(),
		ready: opts.Ready,
		log:   opts.Logger,
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	statusv1.RegisterStatusServiceServer(s.grpc, opts.Service)
	reflection.Register(s.grpc)

	gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}))
	// Registering on a fresh mux only fails for a nil mux or service.
	if err := statusv1.RegisterStatusServiceHandlerServer(context.Background(), gw, opts.Service); err != nil {
		return nil, fmt.Errorf("status: registering the REST gateway: %w", err)
	}
	s.mux.Handle("/v1/", gw)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if opts.Metrics != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{
			Registry:          opts.Metrics,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
			EnableOpenMetrics: true,
		}))
	}
	return s, nil
}

// Handle mounts an extra HTTP handler, with http.ServeMux's pattern syntax
// (e.g. "GET /debug/leases/{id}"). It panics, as ServeMux does, on a pattern
// that conflicts with one already mounted.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// GRPCServer is the gRPC server, to register further services on before
// Serve.
func (s *Server) GRPCServer() *grpc.Server { return s.grpc }

// Handler is the root HTTP handler: gRPC requests to the gRPC server, the
// rest to the HTTP mux. Serve uses it; tests and embedders may too.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			s.grpc.ServeHTTP(w, r)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// readyResponse is GET /readyz's body.
type readyResponse struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var reasons []string
	if s.ready != nil {
		reasons = s.ready()
	}
	body := readyResponse{Ready: len(reasons) == 0, Reasons: reasons}
	if body.Reasons == nil {
		body.Reasons = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// Serve serves gRPC and HTTP on ln until ctx ends, then shuts down: it stops
// accepting, lets requests in flight finish for up to ShutdownTimeout, and
// returns nil. It returns an error if serving fails first. It closes ln.
// A Server serves once: Serve stops its gRPC server on the way out.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("status API serving", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		s.grpc.Stop()
		return fmt.Errorf("status: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		s.log.Warn("status API: requests still in flight at shutdown; closing", "err", err)
		_ = srv.Close()
	}
	// Shutdown has closed the HTTP/2 connections; this ends gRPC handlers
	// and frees the gRPC server's resources.
	s.grpc.Stop()
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("status: serving on %s: %w", ln.Addr(), serveErr)
	}
	s.log.Info("status API stopped", "addr", ln.Addr().String())
	return nil
}

// ListenAndServe listens on addr (DefaultListen when empty) and serves until
// ctx ends, as Serve. It fails at once if addr cannot be bound.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if addr == "" {
		addr = DefaultListen
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return s.Serve(ctx, ln)
}
