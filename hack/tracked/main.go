// Command tracked fails when the repository tracks a build output: `make verify` runs it on
// every file `git ls-files` lists, so that a binary committed by mistake (a go build at the
// root, a test binary) cannot hide from the clean-tree check, which sees only untracked files.
//
// A file is a build output when it is an executable or object format (ELF, Mach-O, PE, an ar
// archive, WebAssembly), when its executable bit is set and it is no script (no "#!"), or when
// it is larger than maxSize.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
)

// maxSize is the largest file the repository may track: 2 MiB. The largest source file is the
// generated JobSet CRD (0.8 MB, config/crd/bases); nothing written or generated here comes near
// 2 MiB, while a Go binary of this module is 50 MB or more and even a stripped hello world is
// 1.5 MB (caught by its format before its size).
const maxSize = 2 << 20

// magics are the first bytes of executable and object formats.
var magics = []struct {
	prefix []byte
	format string
}{
	{[]byte("\x7fELF"), "an ELF executable or object"},
	{[]byte{0xfe, 0xed, 0xfa, 0xce}, "a Mach-O binary"},
	{[]byte{0xfe, 0xed, 0xfa, 0xcf}, "a Mach-O binary"},
	{[]byte{0xce, 0xfa, 0xed, 0xfe}, "a Mach-O binary"},
	{[]byte{0xcf, 0xfa, 0xed, 0xfe}, "a Mach-O binary"},
	{[]byte{0xca, 0xfe, 0xba, 0xbe}, "a universal Mach-O binary or a Java class"},
	{[]byte("MZ"), "a Windows (PE) executable"},
	{[]byte("!<arch>\n"), "an ar archive (a Go or C library build)"},
	{[]byte("\x00asm"), "a WebAssembly module"},
}

// check says why the file at path, as fsys has it, is a build output, or "" when it is not.
func check(fsys fs.FS, path string) (string, error) {
	info, err := fs.Stat(fsys, path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil // deleted in the work tree: git status shows it
		}
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", nil
	}
	f, err := fsys.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 8)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	for _, m := range magics {
		if bytes.HasPrefix(head, m.prefix) {
			return m.format, nil
		}
	}
	if info.Mode().Perm()&0o111 != 0 && !bytes.HasPrefix(head, []byte("#!")) {
		return "executable but no script (it does not start with #!)", nil
	}
	if info.Size() > maxSize {
		return fmt.Sprintf("%d bytes, over the %d a source file may have", info.Size(), maxSize), nil
	}
	return "", nil
}

func main() {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracked: git ls-files:", err)
		os.Exit(2)
	}
	root := os.DirFS(".")
	bad := 0
	for _, path := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		why, err := check(root, string(path))
		if err != nil {
			fmt.Fprintf(os.Stderr, "tracked: %s: %v\n", path, err)
			os.Exit(2)
		}
		if why != "" {
			fmt.Printf("%s: a build output is tracked: %s (git rm --cached it and ignore it in .gitignore)\n", path, why)
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}
