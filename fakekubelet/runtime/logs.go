package runtime

import (
	"bytes"
	"sync"
)

// logTail is how much of a container's output restartbed keeps: enough for a termination
// message that falls back to the log, and for exec output.
const logTail = 4096

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}

// lastLines returns at most n trailing lines.
func (t *tailBuffer) lastLines(n int) []byte {
	b := bytes.TrimSuffix(t.bytes(), []byte("\n"))
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
