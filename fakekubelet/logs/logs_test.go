package logs_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/restartbed/restartbed/fakekubelet/logs"
)

var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func read(t *testing.T, l *logs.Log, opts *corev1.PodLogOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := l.Read(context.Background(), &buf, opts); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// Output is recorded in the CRI format, line by line and stream by stream, and read back with the
// options of kubectl logs.
func TestReadOptions(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(start)
	l := logs.New(logs.Options{Clock: clk})
	out, errs := l.Writer(logs.Stdout), l.Writer(logs.Stderr)
	fmt.Fprint(out, "one\ntw")
	clk.SetTime(start.Add(time.Second))
	fmt.Fprint(errs, "oops\n")
	fmt.Fprint(out, "o\n")
	clk.SetTime(start.Add(2 * time.Second))
	fmt.Fprint(out, "three\nunfinished")

	if got, want := string(l.Files()[0]), "2026-11-25T10:00:00Z stdout F one\n"+
		"2026-11-25T10:00:01Z stderr F oops\n"+
		"2026-11-25T10:00:01Z stdout F two\n"+
		"2026-11-25T10:00:02Z stdout F three\n"; got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct {
		name string
		opts *corev1.PodLogOptions
		want string
	}{
		{"all", nil, "one\noops\ntwo\nthree\n"},
		{"tail", &corev1.PodLogOptions{TailLines: ptr.To[int64](2)}, "two\nthree\n"},
		{"tail 0", &corev1.PodLogOptions{TailLines: ptr.To[int64](0)}, ""},
		{"tail beyond", &corev1.PodLogOptions{TailLines: ptr.To[int64](10)}, "one\noops\ntwo\nthree\n"},
		{"since seconds", &corev1.PodLogOptions{SinceSeconds: ptr.To[int64](1)}, "oops\ntwo\nthree\n"},
		{"since time", &corev1.PodLogOptions{SinceTime: &metav1.Time{Time: start.Add(2 * time.Second)}}, "three\n"},
		{"timestamps", &corev1.PodLogOptions{TailLines: ptr.To[int64](1), Timestamps: true}, "2026-11-25T10:00:02Z three\n"},
		{"limit", &corev1.PodLogOptions{LimitBytes: ptr.To[int64](6)}, "one\noo"},
		{"stderr", &corev1.PodLogOptions{Stream: ptr.To(corev1.LogStreamStderr)}, "oops\n"},
		{"stdout", &corev1.PodLogOptions{Stream: ptr.To(corev1.LogStreamStdout)}, "one\ntwo\nthree\n"},
	} {
		if got := read(t, l, tc.opts); got != tc.want {
			t.Errorf("%s: read %q, want %q", tc.name, got, tc.want)
		}
	}
	l.Close()
	if got := read(t, l, &corev1.PodLogOptions{TailLines: ptr.To[int64](1)}); got != "unfinished" {
		t.Errorf("after Close the unfinished line reads %q, want it without a newline", got)
	}
}

// A line longer than containerd's limit is recorded in partial pieces and read back whole.
func TestLongLine(t *testing.T) {
	l := logs.New(logs.Options{Clock: clocktesting.NewFakePassiveClock(start)})
	long := strings.Repeat("x", logs.MaxLineSize+10)
	fmt.Fprintln(l.Writer(logs.Stdout), long)
	if got := strings.Count(string(l.Files()[0]), " stdout P "); got != 1 {
		t.Errorf("%d partial records, want 1", got)
	}
	if got := read(t, l, &corev1.PodLogOptions{Timestamps: true}); got != "2026-11-25T10:00:00Z "+long+"\n" {
		t.Errorf("read %d bytes, want the line once with one timestamp", len(got))
	}
}

// The current file is rotated past MaxSize and only MaxFiles files are kept; a plain read sees
// the current file, as the kubelet reads the file the container's status points at.
func TestRotation(t *testing.T) {
	l := logs.New(logs.Options{Clock: clocktesting.NewFakePassiveClock(start), MaxSize: 100, MaxFiles: 3})
	w := l.Writer(logs.Stdout)
	for i := range 20 {
		fmt.Fprintf(w, "line %02d\n", i) // 40 bytes a record
	}
	files := l.Files()
	if len(files) != 3 {
		t.Fatalf("%d files, want 3", len(files))
	}
	if l.Size() > 3*(100+40) {
		t.Errorf("the log holds %d bytes, more than its files' limit", l.Size())
	}
	if got := read(t, l, nil); got != "line 18\nline 19\n" {
		t.Errorf("read %q, want the current file's lines", got)
	}
}

// A follower gets what is written while it reads, follows the log into the next file when it is
// rotated, and returns once the log is closed.
func TestFollow(t *testing.T) {
	l := logs.New(logs.Options{Clock: clocktesting.NewFakePassiveClock(start), MaxSize: 60, MaxFiles: 5})
	w := l.Writer(logs.Stdout)
	fmt.Fprintln(w, "before")
	pr, pw := ioPipe()
	done := make(chan error, 1)
	go func() {
		done <- l.Read(context.Background(), pw, &corev1.PodLogOptions{Follow: true})
		pw.Close()
	}()
	<-pw.first // the follower has opened the file
	want := "before\n"
	for i := range 4 {
		line := fmt.Sprintf("after %d", i)
		fmt.Fprintln(w, line)
		want += line + "\n"
	}
	l.Close()
	got := <-pr
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("followed %q, want %q", got, want)
	}
	if len(l.Files()) < 2 {
		t.Errorf("the log was not rotated while followed")
	}
}

// A follower returns when its context ends.
func TestFollowCancel(t *testing.T) {
	l := logs.New(logs.Options{Clock: clocktesting.NewFakePassiveClock(start)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Read(ctx, &bytes.Buffer{}, &corev1.PodLogOptions{Follow: true}) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// ioPipe collects what is written until Close into one string.
func ioPipe() (<-chan string, *collector) {
	c := &collector{out: make(chan string, 1), first: make(chan struct{})}
	return c.out, c
}

type collector struct {
	buf   bytes.Buffer
	out   chan string
	first chan struct{} // closed at the first write
	once  sync.Once
}

func (c *collector) Write(p []byte) (int, error) {
	defer c.once.Do(func() { close(c.first) })
	return c.buf.Write(p)
}
func (c *collector) Close() { c.out <- c.buf.String() }
