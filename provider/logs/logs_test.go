package logs_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/provider/logs"
)

type readers map[uint64][]string

func (r readers) Readers(_ context.Context, lease uint64) ([]string, error) {
	if rs, ok := r[lease]; ok {
		return rs, nil
	}
	return nil, logs.ErrUnknownLease
}

type account struct {
	key  *secp256k1.PrivKey
	addr string
}

func newAccount(t *testing.T) account {
	k := secp256k1.GenPrivKey()
	addr, err := bech32.ConvertAndEncode("depin", k.PubKey().Address())
	require.NoError(t, err)
	return account{k, addr}
}

func (a account) client(url string) *logs.Client {
	return &logs.Client{BaseURL: url, ChainID: "c1", Reader: a.addr, Sign: func(msg []byte) ([]byte, []byte, error) {
		sig, err := a.key.Sign(msg)
		return sig, a.key.PubKey().Bytes(), err
	}}
}

// The owner reads complete lines and resumes by offset; a line being
// written is held back until it is complete; a stranger gets 403, an
// unsigned request 401, a signature for another chain 401.
func TestLogsServedToTheOwnerOnly(t *testing.T) {
	owner, auditor, stranger := newAccount(t), newAccount(t), newAccount(t)
	work := t.TempDir()
	dir := logs.Dir(work, 5)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "trainer.stdout.log")
	require.NoError(t, os.WriteFile(path, []byte("step 1\nstep 2\nstep"), 0o644))
	srv := httptest.NewServer(&logs.Server{ChainID: "c1", WorkDir: work, Chain: readers{5: {owner.addr, auditor.addr}}})
	defer srv.Close()
	ctx := context.Background()

	data, next, err := owner.client(srv.URL).Read(ctx, 5, "stdout", 0)
	require.NoError(t, err)
	require.Equal(t, "step 1\nstep 2\n", string(data))
	require.Equal(t, int64(14), next)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(" 3\n")
	f.Close()
	data, next, err = auditor.client(srv.URL).Read(ctx, 5, "stdout", next)
	require.NoError(t, err)
	require.Equal(t, "step 3\n", string(data))
	data, _, err = owner.client(srv.URL).Read(ctx, 5, "stdout", next+7)
	require.NoError(t, err)
	require.Empty(t, data)

	var se *logs.StatusError
	_, _, err = stranger.client(srv.URL).Read(ctx, 5, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusForbidden, "%v", err)
	require.Contains(t, se.Msg, "neither the owner nor an auditor")
	unsigned := owner.client(srv.URL)
	unsigned.Sign = nil
	_, _, err = unsigned.Read(ctx, 5, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusUnauthorized, "%v", err)
	require.Contains(t, se.Msg, "not signed")
	other := owner.client(srv.URL)
	other.ChainID = "c2"
	_, _, err = other.Read(ctx, 5, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusUnauthorized, "%v", err)
	stale := owner.client(srv.URL)
	stale.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	_, _, err = stale.Read(ctx, 5, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusUnauthorized, "%v", err)
	// Another account's key under the owner's address.
	forged := stranger.client(srv.URL)
	forged.Reader = owner.addr
	_, _, err = forged.Read(ctx, 5, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusUnauthorized, "%v", err)
	_, _, err = owner.client(srv.URL).Read(ctx, 6, "stdout", 0)
	require.True(t, errors.As(err, &se) && se.Code == http.StatusNotFound, "%v", err)
}
