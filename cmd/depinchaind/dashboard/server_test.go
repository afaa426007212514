package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
)

// The pages and Chart.js come from the binary, Chart.js within the 1 MB
// the repository allows, and a malformed job id is refused before any query.
func TestHandlerServesEmbeddedAssets(t *testing.T) {
	srv := httptest.NewServer(Handler(jobview.New(nil, nil, nil), Config{ChainID: "c1"}))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<script src="vendor/chart.min.js">`)
	code, body = get("/vendor/chart.min.js")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.HasPrefix(body, "/*!\n * Chart.js v3."), body[:40])
	require.Less(t, len(body), 1<<20)
	code, body = get("/vendor/chart.js.copyright")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "License: Expat")
	code, body = get("/api/config")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"chain_id":"c1","poll_ms":2000}`, body)
	code, _ = get("/api/jobs/x")
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = get("/api/jobs?state=RUNNING")
	require.Equal(t, http.StatusBadRequest, code)
}
