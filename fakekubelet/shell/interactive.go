package shell

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"mvdan.cc/sh/v3/syntax"
)

// interactive reads commands from stdin and runs them as they come, as sh does with no script:
// with no stdin it exits at once (an empty input). The commands themselves read an empty stdin. On a terminal it prompts as busybox's root
// shell does ("/ # ", "> " for a continued line), echoes what is typed and ends lines with CRLF,
// as the pod's pseudo-terminal would.
func (p *process) interactive(ctx context.Context, params []string) int {
	if p.env.Stdin == nil {
		return 0
	}
	if p.env.TTY {
		p.env.Stdout = crlf{orDiscard(p.env.Stdout)}
		p.env.Stderr = p.env.Stdout
		p.env.Stdin = &terminal{in: p.env.Stdin, echo: p.env.Stdout}
	}
	// The interpreter copies a command's stdin ahead of it, which would take the lines meant for
	// the shell: the commands an interactive shell runs read an empty stdin.
	runner, err := p.newRunner(nil, params)
	if err != nil {
		fmt.Fprintf(p.stderr(), "sh: %v\n", err)
		return ExitUsage
	}
	prompt := func(continued bool) {
		switch {
		case !p.env.TTY:
		case continued:
			fmt.Fprint(p.stdout(), "> ")
		default:
			fmt.Fprintf(p.stdout(), "%s # ", runner.Dir)
		}
	}
	prompt(false)
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	code := 0
	for stmts, err := range parser.InteractiveSeq(p.env.Stdin) {
		if err != nil {
			fmt.Fprintf(p.stderr(), "sh: syntax error: %v\n", err)
			code = ExitUsage
			prompt(false)
			continue
		}
		if parser.Incomplete() {
			prompt(true)
			continue
		}
		for _, stmt := range stmts {
			code = exitCode(runner.Run(ctx, stmt))
			if runner.Exited() || ctx.Err() != nil {
				return code
			}
		}
		prompt(false)
	}
	return code
}

// crlf ends lines with CR LF, as a terminal's output processing does.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// terminal is a pseudo-terminal's line discipline in canonical mode: it echoes what is typed,
// hands a line over when Enter (CR) ends it, erases a character on DEL or backspace, drops the
// line on ^C and ends the input on ^D at the start of a line.
type terminal struct {
	in    io.Reader
	echo  io.Writer
	line  []byte
	ready []byte
	eof   bool
}

const (
	ctrlC     = 0x03
	ctrlD     = 0x04
	backspace = 0x08
	del       = 0x7f
)

func (t *terminal) Read(p []byte) (int, error) {
	buf := make([]byte, 256)
	for len(t.ready) == 0 {
		if t.eof {
			return 0, io.EOF
		}
		n, err := t.in.Read(buf)
		for _, b := range buf[:n] {
			t.key(b)
		}
		if err != nil && len(t.ready) == 0 {
			t.eof = true
			if len(t.line) > 0 {
				t.ready, t.line = t.line, nil
			}
		}
	}
	n := copy(p, t.ready)
	t.ready = t.ready[n:]
	return n, nil
}

func (t *terminal) key(b byte) {
	switch b {
	case '\r', '\n':
		_, _ = t.echo.Write([]byte("\n"))
		t.ready = append(t.ready, append(t.line, '\n')...)
		t.line = nil
	case del, backspace:
		if len(t.line) > 0 {
			t.line = t.line[:len(t.line)-1]
			_, _ = io.WriteString(t.echo, "\b \b")
		}
	case ctrlC:
		_, _ = io.WriteString(t.echo, "^C\n")
		t.line = nil
		t.ready = append(t.ready, '\n')
	case ctrlD:
		if len(t.line) == 0 {
			t.eof = true
		}
	default:
		_, _ = t.echo.Write([]byte{b})
		t.line = append(t.line, b)
	}
}
