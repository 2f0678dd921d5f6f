// Package vfs is the in-memory filesystem of emulated containers: each container gets its own
// tree, which a restart throws away, and pod volumes are directories mounted into several trees
// at once, so that what one container writes to an emptyDir the others (and its own next
// instance) read.
//
// It never touches the host's disk and keeps no process-wide state. All paths are absolute and
// slash-separated; the trees of one Store (one emulated kubelet's) share its lock, because their
// volumes are shared.
package vfs

import (
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// node is a file or a directory.
type node struct {
	name     string
	dir      bool
	perm     fs.FileMode
	data     []byte
	children map[string]*node
	modTime  time.Time
}

func newDir(name string, perm fs.FileMode, now time.Time) *node {
	return &node{name: name, dir: true, perm: perm, children: map[string]*node{}, modTime: now}
}

// Volume is a directory that can be mounted into the trees of a pod's containers; it outlives
// the containers.
type Volume struct{ root *node }

// Store holds the trees of every pod whose volumes can be shared: volumes are shared beyond one
// pod (hostPath by a node's pods, a claim by any pod that mounts it), so one pod's lock would not
// cover them, and one lock guards every tree of the store. File operations are short, in-memory
// work.
type Store struct {
	mu    sync.Mutex
	clock clock.PassiveClock
}

// NewStore returns an empty store whose clock stamps file times.
func NewStore(clk clock.PassiveClock) *Store { return &Store{clock: clk} }

// Pod holds what the containers of one pod share: the store's lock and clock.
type Pod struct {
	mu    *sync.Mutex
	clock clock.PassiveClock
}

// NewPod returns the shared state of one pod's filesystems.
func (s *Store) NewPod() *Pod { return &Pod{mu: &s.mu, clock: s.clock} }

// NewVolume returns an empty volume (an emptyDir).
func (p *Pod) NewVolume() *Volume { return &Volume{root: newDir("", 0o777, p.clock.Now())} }

// FS is one container's filesystem tree.
type FS struct {
	pod  *Pod
	root *node
}

// standardDirs exist in every container, as in a minimal image.
var standardDirs = []string{"/bin", "/dev", "/etc", "/home", "/proc", "/root", "/sys", "/tmp", "/usr", "/usr/bin", "/var", "/var/tmp"}

// NewFS returns a fresh container tree with the directories of a minimal image.
func (p *Pod) NewFS() *FS {
	now := p.clock.Now()
	f := &FS{pod: p, root: newDir("/", 0o755, now)}
	for _, d := range standardDirs {
		_, _ = f.mkdirAll(d, 0o755, now) // a fresh tree: nothing can be in the way
	}
	f.root.children["tmp"].perm = fs.ModeSticky | 0o777
	return f
}

// Mount makes the volume appear at dir (created with its parents if missing); what was there
// is hidden.
func (f *FS) Mount(dir string, v *Volume) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	dir = clean(dir)
	if dir == "/" {
		return &fs.PathError{Op: "mount", Path: dir, Err: fs.ErrInvalid}
	}
	parent, err := f.mkdirAll(path.Dir(dir), 0o755, f.pod.clock.Now())
	if err != nil {
		return err
	}
	parent.children[path.Base(dir)] = v.root
	return nil
}

func clean(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

func pathErr(op, p string, err error) error { return &fs.PathError{Op: op, Path: p, Err: err} }

// lookup finds the node at p; f.pod.mu is held.
func (f *FS) lookup(op, p string) (*node, error) {
	n := f.root
	for _, part := range strings.Split(strings.TrimPrefix(clean(p), "/"), "/") {
		if part == "" {
			continue
		}
		if !n.dir {
			return nil, pathErr(op, p, syscall.ENOTDIR)
		}
		child, ok := n.children[part]
		if !ok {
			return nil, pathErr(op, p, fs.ErrNotExist)
		}
		n = child
	}
	return n, nil
}

// parentOf returns the directory that holds p and p's base name; f.pod.mu is held.
func (f *FS) parentOf(op, p string) (*node, string, error) {
	p = clean(p)
	if p == "/" {
		return nil, "", pathErr(op, p, fs.ErrInvalid)
	}
	dir, err := f.lookup(op, path.Dir(p))
	if err != nil {
		return nil, "", pathErr(op, p, fs.ErrNotExist)
	}
	if !dir.dir {
		return nil, "", pathErr(op, p, syscall.ENOTDIR)
	}
	return dir, path.Base(p), nil
}

func (f *FS) mkdirAll(p string, perm fs.FileMode, now time.Time) (*node, error) {
	n := f.root
	for _, part := range strings.Split(strings.TrimPrefix(clean(p), "/"), "/") {
		if part == "" {
			continue
		}
		child, ok := n.children[part]
		switch {
		case !ok:
			child = newDir(part, perm, now)
			n.children[part] = child
			n.modTime = now
		case !child.dir:
			return nil, pathErr("mkdir", p, syscall.ENOTDIR)
		}
		n = child
	}
	return n, nil
}

// Mkdir creates a directory; with parents, its missing parents too, and an existing directory
// is no error.
func (f *FS) Mkdir(p string, perm fs.FileMode, parents bool) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	now := f.pod.clock.Now()
	if parents {
		_, err := f.mkdirAll(p, perm, now)
		return err
	}
	dir, base, err := f.parentOf("mkdir", p)
	if err != nil {
		return err
	}
	if _, ok := dir.children[base]; ok {
		return pathErr("mkdir", p, fs.ErrExist)
	}
	dir.children[base] = newDir(base, perm, now)
	dir.modTime = now
	return nil
}

// Remove deletes a file or an empty directory; recursive deletes a directory with its content.
func (f *FS) Remove(p string, recursive bool) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	dir, base, err := f.parentOf("remove", p)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", p, fs.ErrNotExist)
	}
	if n.dir && len(n.children) > 0 && !recursive {
		return pathErr("remove", p, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	dir.modTime = f.pod.clock.Now()
	return nil
}

// Rename moves a file or directory.
func (f *FS) Rename(from, to string) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	src, srcBase, err := f.parentOf("rename", from)
	if err != nil {
		return err
	}
	n, ok := src.children[srcBase]
	if !ok {
		return pathErr("rename", from, fs.ErrNotExist)
	}
	dst, dstBase, err := f.parentOf("rename", to)
	if err != nil {
		return err
	}
	if existing, ok := dst.children[dstBase]; ok && existing.dir {
		dst, dstBase = existing, srcBase
	}
	delete(src.children, srcBase)
	n.name = dstBase
	dst.children[dstBase] = n
	return nil
}

// Touch creates an empty file if p does not exist, else sets its modification time.
func (f *FS) Touch(p string) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	now := f.pod.clock.Now()
	if n, err := f.lookup("touch", p); err == nil {
		n.modTime = now
		return nil
	}
	dir, base, err := f.parentOf("touch", p)
	if err != nil {
		return err
	}
	dir.children[base] = &node{name: base, perm: 0o644, modTime: now}
	return nil
}

// ReadFile returns a file's content.
func (f *FS) ReadFile(p string) ([]byte, error) {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	n, err := f.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, pathErr("read", p, syscall.EISDIR)
	}
	return slices.Clone(n.data), nil
}

// WriteFile replaces a file's content, creating the file if needed.
func (f *FS) WriteFile(p string, data []byte) error {
	h, err := f.Open(p, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = h.Write(data)
	return err
}

// Chmod sets the permission bits of the file or directory at p.
func (f *FS) Chmod(p string, perm fs.FileMode) error {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	n, err := f.lookup("chmod", p)
	if err != nil {
		return err
	}
	n.perm = perm.Perm() | n.perm&(fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)
	return nil
}

// Stat describes the file or directory at p.
func (f *FS) Stat(p string) (fs.FileInfo, error) {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	n, err := f.lookup("stat", p)
	if err != nil {
		return nil, err
	}
	return info(n), nil
}

// ReadDir lists a directory, sorted by name.
func (f *FS) ReadDir(p string) ([]fs.DirEntry, error) {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	n, err := f.lookup("open", p)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, pathErr("readdirent", p, syscall.ENOTDIR)
	}
	entries := make([]fs.DirEntry, 0, len(n.children))
	for _, c := range n.children {
		entries = append(entries, fs.FileInfoToDirEntry(info(c)))
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Open opens a file with os.OpenFile's flags.
func (f *FS) Open(p string, flag int, perm fs.FileMode) (io.ReadWriteCloser, error) {
	f.pod.mu.Lock()
	defer f.pod.mu.Unlock()
	n, err := f.lookup("open", p)
	switch {
	case err == nil && flag&syscall.O_CREAT != 0 && flag&syscall.O_EXCL != 0:
		return nil, pathErr("open", p, fs.ErrExist)
	case err == nil && n.dir && flag&(syscall.O_WRONLY|syscall.O_RDWR) != 0:
		return nil, pathErr("open", p, syscall.EISDIR)
	case err != nil && flag&syscall.O_CREAT != 0:
		dir, base, perr := f.parentOf("open", p)
		if perr != nil {
			return nil, perr
		}
		n = &node{name: base, perm: perm.Perm(), modTime: f.pod.clock.Now()}
		dir.children[base] = n
	case err != nil:
		return nil, err
	}
	if flag&syscall.O_TRUNC != 0 && !n.dir {
		n.data = nil
		n.modTime = f.pod.clock.Now()
	}
	return &handle{fs: f, n: n, appendOnly: flag&syscall.O_APPEND != 0}, nil
}

// handle is an open file.
type handle struct {
	fs         *FS
	n          *node
	offset     int
	appendOnly bool
}

func (h *handle) Read(b []byte) (int, error) {
	h.fs.pod.mu.Lock()
	defer h.fs.pod.mu.Unlock()
	if h.n.dir {
		return 0, syscall.EISDIR
	}
	if h.offset >= len(h.n.data) {
		return 0, io.EOF
	}
	n := copy(b, h.n.data[h.offset:])
	h.offset += n
	return n, nil
}

func (h *handle) Write(b []byte) (int, error) {
	h.fs.pod.mu.Lock()
	defer h.fs.pod.mu.Unlock()
	if h.appendOnly {
		h.offset = len(h.n.data)
	}
	if end := h.offset + len(b); end > len(h.n.data) {
		h.n.data = append(h.n.data, make([]byte, end-len(h.n.data))...)
	}
	copy(h.n.data[h.offset:], b)
	h.offset += len(b)
	h.n.modTime = h.fs.pod.clock.Now()
	return len(b), nil
}

func (h *handle) Close() error { return nil }

// fileInfo is a snapshot of a node; Sys gives the shell's ownership tests a root-owned file.
type fileInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func info(n *node) fileInfo {
	mode := n.perm
	if n.dir {
		mode |= fs.ModeDir
	}
	return fileInfo{name: n.name, size: int64(len(n.data)), mode: mode, modTime: n.modTime}
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return i.modTime }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return &syscall.Stat_t{} }

// FS returns a tree whose root is the volume, to fill it before any container mounts it.
func (v *Volume) FS(p *Pod) *FS { return &FS{pod: p, root: v.root} }
