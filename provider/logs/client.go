package logs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Signer signs msg with the reader's account key and returns the
// signature and the compressed secp256k1 public key.
type Signer func(msg []byte) (sig, pubkey []byte, err error)

// Client reads one provider's logs as Reader.
type Client struct {
	BaseURL string // the provider's public URL
	ChainID string
	Reader  string // bech32
	Sign    Signer
	HTTP    *http.Client
	Now     func() time.Time
}

// StatusError is a refusal from the server.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

// Read returns the complete lines of lease's stream from offset on and the
// offset to read from next.
func (c *Client) Read(ctx context.Context, lease uint64, stream string, offset int64) ([]byte, int64, error) {
	u := fmt.Sprintf("%s%s%d?%s", strings.TrimRight(c.BaseURL, "/"), PathPrefix, lease,
		url.Values{"stream": {stream}, "offset": {strconv.FormatInt(offset, 10)}}.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, offset, err
	}
	if c.Sign != nil {
		now := time.Now
		if c.Now != nil {
			now = c.Now
		}
		unix := now().Unix()
		sig, pk, err := c.Sign(Message(c.ChainID, lease, unix))
		if err != nil {
			return nil, offset, fmt.Errorf("signing the request: %w", err)
		}
		req.Header.Set(HeaderReader, c.Reader)
		req.Header.Set(HeaderPubkey, base64.StdEncoding.EncodeToString(pk))
		req.Header.Set(HeaderTime, strconv.FormatInt(unix, 10))
		req.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, offset, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxChunk+1))
	if err != nil {
		return nil, offset, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, offset, &StatusError{Code: resp.StatusCode, Msg: msg}
	}
	next, err := strconv.ParseInt(resp.Header.Get(HeaderNext), 10, 64)
	if err != nil || next != offset+int64(len(body)) {
		return nil, offset, fmt.Errorf("%s: %s %q does not follow offset %d and %d bytes", u, HeaderNext, resp.Header.Get(HeaderNext), offset, len(body))
	}
	return body, next, nil
}
