package vfs

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestTreeOperations(t *testing.T) {
	pod := NewStore(clocktesting.NewFakeClock(time.Unix(0, 0))).NewPod()
	f := pod.NewFS()
	if err := f.Mkdir("/a/b", 0o755, false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("mkdir without parents: %v", err)
	}
	if err := f.Mkdir("/a/b", 0o755, true); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteFile("/a/b/f", []byte("one")); err != nil {
		t.Fatal(err)
	}
	h, _ := f.Open("/a/b/f", syscall.O_WRONLY|syscall.O_APPEND, 0)
	_, _ = h.Write([]byte("+two"))
	if data, _ := f.ReadFile("/a/b/f"); string(data) != "one+two" {
		t.Errorf("append: %q", data)
	}
	if _, err := f.Open("/missing/f", syscall.O_WRONLY|syscall.O_CREAT, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("create under a missing directory: %v", err)
	}
	if err := f.Remove("/a", false); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Errorf("remove a non-empty directory: %v", err)
	}
	if err := f.Rename("/a/b/f", "/tmp"); err != nil {
		t.Fatal(err)
	}
	r, err := f.Open("/tmp/f", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := io.ReadAll(r); string(data) != "one+two" {
		t.Errorf("renamed file: %q", data)
	}
	if err := f.Remove("/a", true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat("/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after rm -r: %v", err)
	}
}

func TestVolumesAreShared(t *testing.T) {
	pod := NewStore(clocktesting.NewFakeClock(time.Unix(0, 0))).NewPod()
	vol := pod.NewVolume()
	a, b := pod.NewFS(), pod.NewFS()
	if err := a.Mount("/data", vol); err != nil {
		t.Fatal(err)
	}
	if err := b.Mount("/mnt/shared", vol); err != nil {
		t.Fatal(err)
	}
	if err := a.Touch("/data/marker"); err != nil {
		t.Fatal(err)
	}
	if err := a.Touch("/tmp/private"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat("/mnt/shared/marker"); err != nil {
		t.Errorf("b does not see the volume's file: %v", err)
	}
	if _, err := b.Stat("/tmp/private"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b sees a's own file: %v", err)
	}
}
