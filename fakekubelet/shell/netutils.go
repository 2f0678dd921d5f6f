package shell

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// The network utilities of a busybox image (ping, nslookup, wget, nc), curl, and glibc's getent
// hosts. They reach the cluster through Env.Net; every wait is on the component clock.

// options parses getopt-style arguments: single-letter flags, which may be grouped ("-qO-"), and
// those in withValue, which take the rest of the word or the next one. long maps long options to
// their letter ("--spider" to 'S'); a long option with a value is "--output=FILE" or
// "--output FILE". Operands and flags may interleave, as GNU getopt allows. A value option given
// again replaces its value, except those in repeatable, whose values are kept one per line
// (curl's and wget's headers).
func (c *call) options(withValue, repeatable string, long map[string]rune) (flags map[rune]bool, values map[rune]string, operands []string, err error) {
	flags, values = map[rune]bool{}, map[rune]string{}
	args := c.args[1:]
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		switch {
		case a == "--":
			return flags, values, append(operands, args...), nil
		case strings.HasPrefix(a, "--"):
			name, value, hasValue := strings.Cut(a[2:], "=")
			r, ok := long[name]
			if !ok {
				return nil, nil, nil, fmt.Errorf("unrecognized option '%s'", a)
			}
			if !strings.ContainsRune(withValue, r) {
				flags[r] = true
				continue
			}
			if !hasValue {
				if len(args) == 0 {
					return nil, nil, nil, fmt.Errorf("option '%s' requires an argument", a)
				}
				value, args = args[0], args[1:]
			}
			setValue(values, repeatable, r, value)
		case len(a) > 1 && a[0] == '-':
			for i, r := range a[1:] {
				if !strings.ContainsRune(withValue, r) {
					flags[r] = true
					continue
				}
				value := a[2+i:]
				if value == "" {
					if len(args) == 0 {
						return nil, nil, nil, fmt.Errorf("option requires an argument -- '%c'", r)
					}
					value, args = args[0], args[1:]
				}
				setValue(values, repeatable, r, value)
				break
			}
		default:
			operands = append(operands, a)
		}
	}
	return flags, values, operands, nil
}

// seconds reads a flag's value in seconds (fractions allowed); def when absent.
// setValue records an option's value: appended on a line of its own when the option is
// repeatable and was given before, else replacing it.
func setValue(values map[rune]string, repeatable string, r rune, value string) {
	if prev, ok := values[r]; ok && strings.ContainsRune(repeatable, r) {
		value = prev + "\n" + value
	}
	values[r] = value
}

func seconds(values map[rune]string, flag rune, def time.Duration) (time.Duration, error) {
	v, ok := values[flag]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid number '%s'", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// ping is busybox's: ping [-c COUNT] [-W TIMEOUT] [-w DEADLINE] [-i INTERVAL] [-q] HOST. A reply
// takes no time; an echo nobody answers is given up after TIMEOUT (default 10 s) when it is the
// last one.
func ping(ctx context.Context, c *call) int {
	flags, values, operands, err := c.options("cWwis", "", nil)
	if err != nil || len(operands) != 1 {
		return c.fail("usage: ping [-c COUNT] [-W TIMEOUT] [-w DEADLINE] [-i INTERVAL] [-q] HOST")
	}
	count := -1
	if v, ok := values['c']; ok {
		if count, err = strconv.Atoi(v); err != nil || count < 1 {
			return c.fail("invalid number '%s'", v)
		}
	}
	timeout, err1 := seconds(values, 'W', 10*time.Second)
	deadline, err2 := seconds(values, 'w', 0)
	interval, err3 := seconds(values, 'i', time.Second)
	if err := errors.Join(err1, err2, err3); err != nil {
		return c.fail("%v", err)
	}
	host := operands[0]
	r, err := c.p.lookupHost(ctx, host, true)
	addr, ok := r.firstIPv4()
	if err != nil || !ok {
		return c.fail("bad address '%s'", host)
	}
	if c.p.env.Net == nil {
		return c.fail("sendto: Network is unreachable")
	}
	ctx, cancel := c.withTimeout(ctx, deadline)
	defer cancel()
	fmt.Fprintf(c.hc.Stdout, "PING %s (%s): 56 data bytes\n", host, addr)
	sent, received := 0, 0
	for seq := 0; count < 0 || seq < count; seq++ {
		if ctx.Err() != nil {
			break
		}
		sent++
		if c.p.env.Net.Ping(ctx, addr) == nil {
			received++
			if !flags['q'] {
				fmt.Fprintf(c.hc.Stdout, "64 bytes from %s: seq=%d ttl=64 time=0.100 ms\n", addr, seq)
			}
		}
		last := count > 0 && seq == count-1
		wait := interval
		if last {
			wait = 0
			if received < sent {
				wait = timeout
			}
		}
		if !c.p.env.Sleep(ctx, wait) {
			break
		}
	}
	fmt.Fprintf(c.hc.Stdout, "\n--- %s ping statistics ---\n", host)
	loss := 0
	if sent > 0 {
		loss = (sent - received) * 100 / sent
	}
	fmt.Fprintf(c.hc.Stdout, "%d packets transmitted, %d packets received, %d%% packet loss\n", sent, received, loss)
	if received == 0 {
		return 1
	}
	fmt.Fprintln(c.hc.Stdout, "round-trip min/avg/max = 0.100/0.100/0.100 ms")
	return 0
}

// nslookup is busybox's: nslookup HOST [SERVER]. It asks the nameserver only, never the hosts
// file; with SERVER, that server instead of resolv.conf's.
func nslookup(ctx context.Context, c *call) int {
	_, _, operands, err := c.options("", "", nil)
	if err != nil || len(operands) < 1 || len(operands) > 2 {
		return c.fail("usage: nslookup HOST [DNS_SERVER]")
	}
	host := operands[0]
	var servers []netip.Addr
	if len(operands) == 2 {
		server, err := netip.ParseAddr(operands[1])
		if err != nil {
			return c.fail("bad address '%s'", operands[1])
		}
		servers = []netip.Addr{server}
	}
	r, err := c.p.queryDNS(ctx, host, servers)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsTimeout {
		fmt.Fprintln(c.hc.Stdout, ";; connection timed out; no servers could be reached")
		return 1
	}
	server := r.server
	if err != nil {
		server, _ = netip.ParseAddr(dnsErr.Server) // the zero address when the resolver named none
	}
	fmt.Fprintf(c.hc.Stdout, "Server:\t\t%s\nAddress:\t%s:53\n\n", server, server)
	if err != nil {
		fmt.Fprintf(c.hc.Stdout, "** server can't find %s: NXDOMAIN\n\n", host)
		return 1
	}
	for _, a := range r.addrs {
		fmt.Fprintf(c.hc.Stdout, "Name:\t%s\nAddress: %s\n\n", r.name, a)
	}
	return 0
}

// withTimeout is ctx cancelled after d on the component clock (no limit when d is 0).
func (c *call) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if d <= 0 {
		return ctx, cancel
	}
	t := c.p.env.Clock.NewTimer(d)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// getent is glibc's for the hosts database: getent hosts NAME... prints "ADDRESS NAME" for each
// name found in the hosts file or the DNS, and exits 2 when one is not found.
func getent(ctx context.Context, c *call) int {
	if len(c.args) < 2 {
		fmt.Fprintln(c.hc.Stderr, "Usage: getent [OPTION...] database [key ...]")
		return 1
	}
	if db := c.args[1]; db != "hosts" && db != "ahosts" && db != "ahostsv4" {
		fmt.Fprintf(c.hc.Stderr, "Unknown database: %s\n", db)
		return 1
	}
	status := 0
	for _, name := range c.args[2:] {
		r, err := c.p.lookupHost(ctx, name, true)
		if err != nil || len(r.addrs) == 0 {
			status = 2
			continue
		}
		a, _ := r.firstIPv4()
		fmt.Fprintf(c.hc.Stdout, "%-15s %s\n", a, r.name)
	}
	return status
}

// dialer opens TCP connections from the container, resolving names as its C library does.
func (c *call) dialer() func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, _, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		r, err := c.p.lookupHost(ctx, host, true)
		if err != nil {
			return nil, err
		}
		a, ok := r.firstIPv4()
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		if c.p.env.Net == nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: network is unreachable")}
		}
		return c.p.env.Net.Dial(ctx, net.JoinHostPort(a.String(), port))
	}
}

// httpGet sends one GET (or HEAD) for rawURL from the container, over TLS for https with tlsCfg.
func (c *call) httpGet(ctx context.Context, method, rawURL string, header http.Header, tlsCfg *tls.Config) (*http.Response, error) {
	if !strings.Contains(rawURL, "://") {
		rawURL = "http://" + rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("unsupported protocol %s", u.Scheme)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, header)
	client := &http.Client{Transport: &http.Transport{DialContext: c.dialer(), DisableKeepAlives: true, Proxy: nil, TLSClientConfig: tlsCfg},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return client.Do(req)
}

// caBundle is where the images' TLS clients find the certificate authorities they trust when not
// told otherwise. restartbed's images ship none, so a server's certificate verifies only against
// a bundle a volume mounts there, or the one --cacert names (a pod's service-account ca.crt).
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// tlsConfig is a client's TLS configuration: the certificate authorities of caFile (default the
// image's bundle), or no verification at all when insecure (curl -k).
func (c *call) tlsConfig(insecure bool, caFile string) (*tls.Config, error) {
	if insecure {
		return &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // G402: the user asked for -k / --no-check-certificate
	}
	file := caFile
	if file == "" {
		file = caBundle
	}
	pool := x509.NewCertPool()
	data, err := c.p.env.FS.ReadFile(c.path(file))
	switch {
	case err == nil:
		if !pool.AppendCertsFromPEM(data) && caFile != "" {
			return nil, fmt.Errorf("error adding trust anchors from file: %s", caFile)
		}
	case caFile != "":
		return nil, fmt.Errorf("error setting certificate file: %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// tlsError is curl's exit code and message for a failed TLS connection, or 0 for another error.
func tlsError(err error, host string) (int, string) {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return 60, "SSL certificate problem: unable to get local issuer certificate"
	case errors.As(err, &hostname):
		return 60, fmt.Sprintf("SSL: no alternative certificate subject name matches target host name '%s'", host)
	case errors.As(err, &invalid):
		return 60, "SSL certificate problem: " + invalid.Error()
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return 35, "TLS connect error: error:0A00010B:SSL routines::wrong version number"
	case strings.Contains(err.Error(), "tls: "):
		return 35, "TLS connect error: " + err.Error()
	}
	return 0, ""
}

// netErrorText is how busybox's and curl's messages name a failed connection.
func netErrorText(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		return "bad address"
	case strings.Contains(err.Error(), "connection refused"):
		return "Connection refused"
	case strings.Contains(err.Error(), "no route to host"):
		return "No route to host"
	case strings.Contains(err.Error(), "network is unreachable"):
		return "Network is unreachable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "Connection timed out"
	}
	return err.Error()
}

// wget is busybox's: wget [-q] [-O FILE] [-T SEC] [--spider] [-S] [--header 'K: V'] URL. Without
// -O it saves to the URL's last path element (index.html for /); -O - writes to stdout.
func wget(ctx context.Context, c *call) int {
	flags, values, operands, err := c.options("OTHU", "H", map[string]rune{"quiet": 'q', "output-document": 'O', "timeout": 'T',
		"spider": 's', "server-response": 'S', "header": 'H', "user-agent": 'U', "no-check-certificate": 'k'})
	if err != nil || len(operands) != 1 {
		return c.fail("usage: wget [-q] [-O FILE] [-T SEC] [--spider] URL")
	}
	timeout, err := seconds(values, 'T', 900*time.Second)
	if err != nil {
		return c.fail("%v", err)
	}
	ctx, cancel := c.withTimeout(ctx, timeout)
	defer cancel()
	header := requestHeader(http.Header{"User-Agent": {"Wget"}}, values['H'], values['U'])
	method := http.MethodGet
	if flags['s'] {
		method = http.MethodHead
	}
	raw := operands[0]
	if !flags['q'] {
		fmt.Fprintf(c.hc.Stderr, "Connecting to %s\n", hostOf(raw))
	}
	// busybox's wget does not verify certificates: it says so and goes on.
	tlsCfg, _ := c.tlsConfig(true, "") // insecure: no file to read
	if strings.HasPrefix(raw, "https://") && !flags['q'] {
		fmt.Fprintln(c.hc.Stderr, "wget: note: TLS certificate validation not implemented")
	}
	resp, err := c.httpGet(ctx, method, raw, header, tlsCfg)
	if err != nil {
		if text := netErrorText(err); text == "bad address" {
			return c.fail("bad address '%s'", hostOnly(raw))
		} else {
			return c.fail("can't connect to remote host (%s): %s", hostOnly(raw), text)
		}
	}
	defer resp.Body.Close()
	if flags['S'] {
		fmt.Fprintf(c.hc.Stderr, "  HTTP/1.1 %s\n", resp.Status)
	}
	if resp.StatusCode >= 400 {
		return c.fail("server returned error: HTTP/1.1 %s", resp.Status)
	}
	if flags['s'] {
		if !flags['q'] {
			fmt.Fprintln(c.hc.Stderr, "remote file exists")
		}
		return 0
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return c.fail("error getting response: %v", err)
	}
	out := values['O']
	if out == "" {
		out = path.Base(resp.Request.URL.Path)
		if out == "/" || out == "." || out == "" {
			out = "index.html"
		}
	}
	if out == "-" {
		_, _ = c.hc.Stdout.Write(body)
		return 0
	}
	if !flags['q'] {
		fmt.Fprintf(c.hc.Stderr, "saving to '%s'\n", out)
	}
	if err := c.p.env.FS.WriteFile(c.path(out), body); err != nil {
		return c.fail("can't open '%s': %s", out, describe(err))
	}
	if !flags['q'] {
		fmt.Fprintf(c.hc.Stderr, "'%s' saved\n", out)
	}
	return 0
}

// requestHeader is a client's default header with the "Key: value" header options (one per line)
// and a user-agent option applied (each empty when not given).
func requestHeader(header http.Header, extra, userAgent string) http.Header {
	for line := range strings.SplitSeq(extra, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if userAgent != "" {
		header.Set("User-Agent", userAgent)
	}
	return header
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

func hostOnly(raw string) string {
	h := hostOf(raw)
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return h
}

// curl is curl's common subset: curl [-s] [-S] [-f] [-o FILE] [-m SEC] [--connect-timeout SEC]
// [-H 'K: V'] [-I] [-w '%{http_code}'] URL, with curl's exit codes (6 no such host, 7 no
// connection, 22 an HTTP error with -f, 28 a timeout).
func curl(ctx context.Context, c *call) int {
	flags, values, operands, err := c.options("omHwAC", "H", map[string]rune{"silent": 's', "show-error": 'S', "fail": 'f',
		"output": 'o', "max-time": 'm', "connect-timeout": 'm', "header": 'H', "head": 'I', "write-out": 'w',
		"user-agent": 'A', "location": 'L', "include": 'i', "insecure": 'k', "cacert": 'C'})
	if err != nil {
		fmt.Fprintf(c.hc.Stderr, "curl: %v\n", err)
		return 2
	}
	if len(operands) != 1 {
		fmt.Fprintln(c.hc.Stderr, "curl: no URL specified")
		return 2
	}
	quiet := flags['s'] && !flags['S']
	fail := func(code int, format string, a ...any) int {
		if !quiet {
			fmt.Fprintf(c.hc.Stderr, "curl: (%d) %s\n", code, fmt.Sprintf(format, a...))
		}
		return code
	}
	timeout, err := seconds(values, 'm', 0)
	if err != nil {
		return fail(2, "%v", err)
	}
	ctx, cancel := c.withTimeout(ctx, timeout)
	defer cancel()
	header := requestHeader(http.Header{"User-Agent": {"curl"}, "Accept": {"*/*"}}, values['H'], values['A'])
	method := http.MethodGet
	if flags['I'] {
		method = http.MethodHead
	}
	raw := operands[0]
	tlsCfg, err := c.tlsConfig(flags['k'], values['C'])
	if err != nil {
		return fail(77, "%v", err)
	}
	resp, err := c.httpGet(ctx, method, raw, header, tlsCfg)
	if err != nil {
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr):
			return fail(6, "Could not resolve host: %s", hostOnly(raw))
		case ctx.Err() != nil:
			return fail(28, "Connection timed out")
		case strings.Contains(err.Error(), "unsupported protocol"):
			return fail(1, "Protocol not supported: %v", err)
		}
		if code, msg := tlsError(err, hostOnly(raw)); code != 0 {
			return fail(code, "%s", msg)
		}
		return fail(7, "Failed to connect to %s: %s", hostOnly(raw), netErrorText(err))
	}
	defer resp.Body.Close()
	if flags['f'] && resp.StatusCode >= 400 {
		return fail(22, "The requested URL returned error: %d", resp.StatusCode)
	}
	out := c.hc.Stdout
	var saved strings.Builder
	if f := values['o']; f != "" && f != "-" {
		out = &saved
	}
	if flags['i'] || flags['I'] {
		fmt.Fprintf(out, "HTTP/1.1 %s\r\n", resp.Status)
		_ = resp.Header.Write(out) // out is the command's output: its writes report nothing
		fmt.Fprint(out, "\r\n")
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return fail(56, "Failure when receiving data from the peer")
	}
	if f := values['o']; f != "" && f != "-" {
		if err := c.p.env.FS.WriteFile(c.path(f), []byte(saved.String())); err != nil {
			return fail(23, "Failure writing output to destination")
		}
	}
	if w, ok := values['w']; ok {
		fmt.Fprint(c.hc.Stdout, strings.NewReplacer(`%{http_code}`, strconv.Itoa(resp.StatusCode), `\n`, "\n").Replace(w))
	}
	return 0
}

// nc is busybox's netcat: nc [-w SEC] HOST PORT connects and copies stdin to the connection and
// the connection to stdout; nc -z HOST PORT only tries the connection; nc -l [-p] PORT [-k]
// accepts one connection (-k: one after another) and does the same with it.
func nc(ctx context.Context, c *call) int {
	flags, values, operands, err := c.options("pw", "", nil)
	if err != nil {
		return c.fail("%v", err)
	}
	if c.p.env.Net == nil {
		return c.fail("network is unreachable")
	}
	idle, err := seconds(values, 'w', 0)
	if err != nil {
		return c.fail("%v", err)
	}
	if flags['l'] {
		portText := values['p']
		if portText == "" && len(operands) > 0 {
			portText = operands[len(operands)-1]
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil || port == 0 {
			return c.fail("usage: nc -l -p PORT")
		}
		l, err := c.p.env.Net.Listen(uint16(port))
		if err != nil {
			return c.fail("%v", err)
		}
		defer l.Close()
		stop := context.AfterFunc(ctx, func() { _ = l.Close() })
		defer stop()
		for {
			conn, err := l.Accept()
			if err != nil {
				return ExitKilled
			}
			c.pump(ctx, conn, idle)
			if !flags['k'] {
				return 0
			}
		}
	}
	if len(operands) != 2 {
		return c.fail("usage: nc [-z] [-w SEC] HOST PORT")
	}
	dialCtx := ctx
	if idle > 0 {
		var cancel context.CancelFunc
		dialCtx, cancel = c.withTimeout(ctx, idle)
		defer cancel()
	}
	conn, err := c.dialer()(dialCtx, "tcp", net.JoinHostPort(operands[0], operands[1]))
	if err != nil {
		if netErrorText(err) == "bad address" {
			return c.fail("bad address '%s'", operands[0])
		}
		if flags['z'] {
			return 1
		}
		return c.fail("can't connect to remote host (%s): %s", operands[0], netErrorText(err))
	}
	if flags['z'] {
		_ = conn.Close()
		return 0
	}
	c.pump(ctx, conn, idle)
	return 0
}

// pump copies stdin to conn and conn to stdout. When stdin ends, the connection's writing half
// is shut down (the peer reads EOF, as with ncat or nc -N); pump returns once the peer has closed
// its half too and stdin has ended — or, with idle, once stdin has ended and nothing came for
// idle — or when ctx ends.
func (c *call) pump(ctx context.Context, conn net.Conn, idle time.Duration) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	// The copy from stdin ends with stdin, or at its first write once conn is closed.
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if c.hc.Stdin != nil {
			_, _ = io.Copy(conn, c.hc.Stdin) // ends when either side closes
		}
		if hc, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite() // the peer may have gone
		}
	}()
	activity := make(chan struct{}, 1)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32*1024)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				_, _ = c.hc.Stdout.Write(buf[:n])
				select {
				case activity <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-stdinDone:
	case <-ctx.Done():
	}
	if idle > 0 {
		for c.idleFor(ctx, idle, activity, readDone) {
		}
		_ = conn.Close()
	}
	<-readDone // the peer closed, or ctx ended and closed conn
}

// idleFor waits idle for activity; true means something came and the wait starts again.
func (c *call) idleFor(ctx context.Context, idle time.Duration, activity, done <-chan struct{}) bool {
	t := c.p.env.Clock.NewTimer(idle)
	defer t.Stop()
	select {
	case <-activity:
		return true
	case <-t.C():
	case <-done:
	case <-ctx.Done():
	}
	return false
}
