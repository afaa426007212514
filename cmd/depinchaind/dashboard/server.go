// Package dashboard serves the job owner's web dashboard: a page that
// polls this server's JSON API, which reads only the chain's public gRPC
// queries and the providers' public checkpoint ports (through jobview).
// Every asset, Chart.js included (vendored from Debian's libjs-chart.js by
// `make vendor-chartjs`), is embedded in the binary: nothing is fetched
// from the internet at run time.
package dashboard

import (
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

//go:embed assets
var assets embed.FS

// Config is what the page needs to know besides the data.
type Config struct {
	// ChainID is shown in the header.
	ChainID string `json:"chain_id"`
	// RESTAddr, when set, is the node's public REST endpoint; the pages
	// link each object to its REST route there, for integrators.
	RESTAddr string `json:"rest_addr,omitempty"`
	// PollMillis is how often the page polls the API.
	PollMillis int `json:"poll_ms"`
}

// Handler serves the pages at / and the JSON API under /api/:
//
//	GET /api/config
//	GET /api/jobs?owner=&state=JOB_STATE_*
//	GET /api/jobs/{id}
//	GET /api/providers/{operator}
//	GET /api/network
func Handler(src *jobview.Source, cfg Config) http.Handler {
	if cfg.PollMillis <= 0 {
		cfg.PollMillis = 2000
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/config", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, cfg, nil) })
	mux.HandleFunc("GET /api/jobs", func(w http.ResponseWriter, r *http.Request) {
		state := r.URL.Query().Get("state")
		if _, ok := markettypes.JobState_value[state]; state != "" && !ok {
			http.Error(w, `{"error":"state: want a JOB_STATE_* name"}`, http.StatusBadRequest)
			return
		}
		rows, err := src.Jobs(r.Context(), r.URL.Query().Get("owner"), state)
		writeJSON(w, rows, err)
	})
	mux.HandleFunc("GET /api/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, `{"error":"job id is not a number"}`, http.StatusBadRequest)
			return
		}
		v, err := src.Job(r.Context(), id)
		writeJSON(w, v, err)
	})
	mux.HandleFunc("GET /api/providers/{operator}", func(w http.ResponseWriter, r *http.Request) {
		v, err := src.Provider(r.Context(), r.PathValue("operator"))
		writeJSON(w, v, err)
	})
	mux.HandleFunc("GET /api/network", func(w http.ResponseWriter, r *http.Request) {
		v, err := src.Network(r.Context(), 20)
		writeJSON(w, v, err)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		code := http.StatusBadGateway
		if s, ok := status.FromError(errors.Unwrap(err)); ok {
			switch s.Code() {
			case codes.NotFound:
				code = http.StatusNotFound
			case codes.InvalidArgument:
				code = http.StatusBadRequest
			}
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}
