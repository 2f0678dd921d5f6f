// Package logs keeps a container's output as containerd writes it and the kubelet reads it: one
// file per container instance in the CRI log format (a timestamp, the stream, a full or partial
// tag and the content, one record per line), rotated when it grows past the kubelet's
// containerLogMaxSize and kept to containerLogMaxFiles files, and read back with the options of
// `kubectl logs` (tail, since, timestamps, byte limit, follow, one stream).
//
// Files live in memory; nothing is written to the host. The package decides nothing about
// instances: the runtime makes one Log per instance and closes it when the process ends.
package logs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Defaults are the kubelet's configuration defaults (containerLogMaxSize, containerLogMaxFiles),
// and containerd's max_container_log_line_size.
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
	MaxLineSize     = 16 << 10
)

// Options configure the logs of a runtime.
type Options struct {
	Clock clock.PassiveClock
	// MaxSize is the size past which the current file is rotated (DefaultMaxSize when 0);
	// MaxFiles how many files a container keeps, the current one included (DefaultMaxFiles).
	MaxSize  int
	MaxFiles int
}

func (o Options) complete() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.MaxFiles < 2 {
		o.MaxFiles = max(o.MaxFiles, DefaultMaxFiles)
	}
	return o
}

// Log is the log of one container instance.
type Log struct {
	opts Options

	mu sync.Mutex
	// files holds the rotated files, oldest first, then the current one; dropped counts the
	// files rotated away before them.
	files   [][]byte
	dropped int
	// partial holds each stream's unfinished line (stdout, stderr).
	partial [2][]byte
	closed  bool
	// grew, when a follower waits on it, is closed at the next write or at Close.
	grew chan struct{}
}

// New returns an empty log.
func New(opts Options) *Log {
	return &Log{opts: opts.complete(), files: [][]byte{nil}}
}

// streamIndex is the index of a stream in Log.partial.
func streamIndex(stream string) int {
	if stream == Stderr {
		return 1
	}
	return 0
}

// Stream names, as the CRI log format spells them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Writer returns the writer of one stream (Stdout or Stderr). Lines are recorded when their
// newline comes; a line longer than MaxLineSize is recorded in partial pieces.
func (l *Log) Writer(stream string) io.Writer { return streamWriter{l, stream} }

type streamWriter struct {
	l      *Log
	stream string
}

func (w streamWriter) Write(p []byte) (int, error) {
	l := w.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return len(p), nil
	}
	now := l.opts.Clock.Now()
	i := streamIndex(w.stream)
	buf := p
	if len(l.partial[i]) > 0 {
		buf = append(l.partial[i], p...)
	}
	for {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 && i <= MaxLineSize {
			l.appendLocked(now, w.stream, true, buf[:i])
			buf = buf[i+1:]
		} else if len(buf) > MaxLineSize {
			l.appendLocked(now, w.stream, false, buf[:MaxLineSize])
			buf = buf[MaxLineSize:]
		} else {
			break
		}
	}
	l.partial[i] = nil
	if len(buf) > 0 {
		l.partial[i] = bytes.Clone(buf)
	}
	l.notifyLocked()
	return len(p), nil
}

// appendLocked writes one record; l.mu is held.
func (l *Log) appendLocked(at time.Time, stream string, full bool, content []byte) {
	tag := "P"
	if full {
		tag = "F"
	}
	cur := &l.files[len(l.files)-1]
	*cur = at.AppendFormat(*cur, time.RFC3339Nano)
	*cur = append(*cur, ' ')
	*cur = append(*cur, stream...)
	*cur = append(*cur, ' ')
	*cur = append(*cur, tag...)
	*cur = append(*cur, ' ')
	*cur = append(*cur, content...)
	*cur = append(*cur, '\n')
	if len(*cur) > l.opts.MaxSize {
		l.files = append(l.files, nil)
		if over := len(l.files) - l.opts.MaxFiles; over > 0 {
			l.files = l.files[over:]
			l.dropped += over
		}
	}
}

func (l *Log) notifyLocked() {
	if l.grew != nil {
		close(l.grew)
		l.grew = nil
	}
}

// grewLocked is closed at the next write or at Close; l.mu is held.
func (l *Log) grewLocked() <-chan struct{} {
	if l.grew == nil {
		l.grew = make(chan struct{})
	}
	return l.grew
}

// Close ends the log when the process has exited: an unfinished line is recorded as a partial
// one (as containerd records it, so that it reads back without a newline), and followers return
// once they have read everything.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	now := l.opts.Clock.Now()
	for i, stream := range []string{Stdout, Stderr} {
		if p := l.partial[i]; len(p) > 0 {
			l.appendLocked(now, stream, false, p)
		}
		l.partial[i] = nil
	}
	l.closed = true
	l.notifyLocked()
}

// Files returns a copy of the files, oldest first, the current one last, in the CRI format.
func (l *Log) Files() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]byte, len(l.files))
	for i, f := range l.files {
		out[i] = bytes.Clone(f)
	}
	return out
}

// Size is the bytes the log's files hold.
func (l *Log) Size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.files {
		n += len(f)
	}
	return n
}

// errLimit ends a read at PodLogOptions.LimitBytes.
var errLimit = errors.New("limit reached")

// Read writes the log to w as the kubelet serves a container's log: from the current file (the
// last TailLines records of it, those not older than SinceSeconds or SinceTime), each line
// prefixed with its time when Timestamps is set, only one stream when Stream says so, at most
// LimitBytes bytes. With Follow it goes on as the log grows, into the next file when the current
// one is rotated, until the log is closed and read or ctx ends.
func (l *Log) Read(ctx context.Context, w io.Writer, opts *corev1.PodLogOptions) error {
	if opts == nil {
		opts = &corev1.PodLogOptions{}
	}
	r := reader{w: w, timestamps: opts.Timestamps, lineStart: true, limit: -1}
	if opts.LimitBytes != nil {
		r.limit = *opts.LimitBytes
	}
	switch {
	case opts.SinceTime != nil:
		r.since = opts.SinceTime.Time
	case opts.SinceSeconds != nil:
		r.since = l.opts.Clock.Now().Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	if opts.Stream != nil && *opts.Stream != corev1.LogStreamAll {
		r.stream = map[string]string{corev1.LogStreamStdout: Stdout, corev1.LogStreamStderr: Stderr}[*opts.Stream]
	}

	l.mu.Lock()
	file := l.dropped + len(l.files) - 1
	off := 0
	if opts.TailLines != nil {
		off = tailOffset(l.files[len(l.files)-1], *opts.TailLines)
	}
	l.mu.Unlock()
	for {
		l.mu.Lock()
		if file < l.dropped { // rotated away while a follower lagged: go on from the oldest kept
			file, off = l.dropped, 0
		}
		data := l.files[file-l.dropped][off:]
		next := file-l.dropped < len(l.files)-1
		closed := l.closed
		var grew <-chan struct{}
		if opts.Follow && !closed && !next {
			grew = l.grewLocked()
		}
		l.mu.Unlock()
		// Records are only ever appended: what data holds does not change outside the lock.
		if err := r.records(data); err != nil {
			if errors.Is(err, errLimit) {
				return nil
			}
			return err
		}
		off += len(data)
		switch {
		case next && opts.Follow:
			file, off = file+1, 0
			continue
		case !opts.Follow || closed:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-grew:
		}
	}
}

// tailOffset is where the last n records of file start.
func tailOffset(file []byte, n int64) int {
	if n < 0 {
		return 0
	}
	end := len(file)
	for ; n > 0; n-- {
		i := bytes.LastIndexByte(file[:max(end-1, 0)], '\n')
		if i < 0 {
			return 0
		}
		end = i + 1
	}
	return end
}

type reader struct {
	w          io.Writer
	since      time.Time
	stream     string // "" for both
	timestamps bool
	// lineStart: the last record written ended its line.
	lineStart bool
	limit     int64 // bytes left; -1 for no limit
}

// records writes the whole records of data.
func (r *reader) records(data []byte) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		rec := data[:i]
		data = data[i+1:]
		ts, rest, _ := bytes.Cut(rec, []byte(" "))
		stream, rest, _ := bytes.Cut(rest, []byte(" "))
		tag, content, _ := bytes.Cut(rest, []byte(" "))
		at, err := time.Parse(time.RFC3339Nano, string(ts))
		if err != nil || (r.stream != "" && string(stream) != r.stream) || at.Before(r.since) {
			continue
		}
		if r.timestamps && r.lineStart {
			if err := r.write(at.AppendFormat(nil, time.RFC3339Nano), ' '); err != nil {
				return err
			}
		}
		full := string(tag) == "F"
		if full {
			content = append(content[:len(content):len(content)], '\n')
		}
		r.lineStart = full
		if err := r.write(content); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) write(p []byte, more ...byte) error {
	p = append(p[:len(p):len(p)], more...)
	if r.limit >= 0 && int64(len(p)) > r.limit {
		p = p[:r.limit]
		if _, err := r.w.Write(p); err != nil {
			return err
		}
		r.limit = 0
		return errLimit
	}
	if _, err := r.w.Write(p); err != nil {
		return err
	}
	if r.limit >= 0 {
		r.limit -= int64(len(p))
		if r.limit == 0 {
			return errLimit
		}
	}
	return nil
}

// Tail is what the kubelet reads for a termination message that falls back to the log: the last
// lines records of the current file, of which the last maxBytes bytes.
func (l *Log) Tail(lines int64, maxBytes int) []byte {
	var buf bytes.Buffer
	_ = l.Read(context.Background(), &buf, &corev1.PodLogOptions{TailLines: &lines}) // reading into memory fails only on a canceled context, and this one is not
	b := buf.Bytes()
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return b
}
