package nodectl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// ErrNotFound is the control API's answer for a unit that does not exist.
var ErrNotFound = errors.New("unit not found")

// Client speaks the control API on a Unix socket.
type Client struct {
	path string
	http *http.Client
}

// NewClient returns a client of the control socket at path.
func NewClient(path string) *Client {
	return &Client{path: path, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}}
}

// Units lists the units.
func (c *Client) Units(ctx context.Context) ([]Unit, error) {
	var units []Unit
	return units, c.do(ctx, http.MethodGet, "/v1/units", nil, &units)
}

// Unit returns the unit of that name (with or without ".service"); ErrNotFound if there is none.
func (c *Client) Unit(ctx context.Context, name string) (Unit, error) {
	var u Unit
	return u, c.do(ctx, http.MethodGet, "/v1/units/"+url.PathEscape(name), nil, &u)
}

// Do applies the operation (one of Ops) to the unit and returns it as it is after.
func (c *Client) Do(ctx context.Context, name, op string) (Unit, error) {
	var u Unit
	return u, c.do(ctx, http.MethodPost, "/v1/units/"+url.PathEscape(name)+"/"+url.PathEscape(op), nil, &u)
}

// do sends the request, with in as its JSON body unless nil, and decodes the answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://restartbed"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("the node control socket %s: %w (is restartbed up running with --control-socket?)", c.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error == "" {
			e.Error = resp.Status
		}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %s", ErrNotFound, e.Error)
		}
		return errors.New(e.Error)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// listenUnix listens on a Unix socket at path, readable and writable by its owner only. A socket
// left there by a process that ended is replaced; any other file is not.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if conn, err := net.Dial("unix", path); err == nil {
			_ = conn.Close()
			return nil, fmt.Errorf("%s: another process serves it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// TrimService returns the unit's name without ".service".
func TrimService(name string) string { return strings.TrimSuffix(name, ".service") }
