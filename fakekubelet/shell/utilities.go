package shell

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/interp"
)

// call is one invocation of an emulated utility.
type call struct {
	p    *process
	hc   interp.HandlerContext
	args []string
}

func (c *call) path(name string) string { return pathIn(c.hc.Dir, name) }

// fail prints "NAME: message" to stderr and returns status 1, as busybox does.
func (c *call) fail(format string, a ...any) int {
	fmt.Fprintf(c.hc.Stderr, "%s: %s\n", path.Base(c.args[0]), fmt.Sprintf(format, a...))
	return 1
}

// flags splits leading single-letter flags ("-rf", "-p") from operands; "--" ends them.
func (c *call) flags() (map[rune]bool, []string) {
	set := map[rune]bool{}
	args := c.args[1:]
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
		if args[0] == "--" {
			return set, args[1:]
		}
		if _, err := strconv.Atoi(args[0][1:]); err == nil {
			break // a negative number (head -5 is handled by its utility)
		}
		for _, f := range args[0][1:] {
			set[f] = true
		}
		args = args[1:]
	}
	return set, args
}

// utility is an emulated program: it returns its exit status.
type utility func(ctx context.Context, c *call) int

// utilities are the programs every emulated image has, by base name.
var utilities map[string]utility

func init() {
	utilities = map[string]utility{
		"sleep":    sleep,
		"touch":    touch,
		"cat":      cat,
		"rm":       rm,
		"mkdir":    mkdir,
		"rmdir":    rmdir,
		"ls":       ls,
		"cp":       cp,
		"mv":       mv,
		"date":     date,
		"nmeter":   nmeter,
		"env":      printEnv,
		"printenv": printEnv,
		"hostname": hostname,
		"seq":      seq,
		"wc":       wc,
		"head":     head,
		"tail":     tail,
		"grep":     grep,
		"tee":      tee,
		"basename": func(_ context.Context, c *call) int { return oneLine(c, path.Base) },
		"dirname":  func(_ context.Context, c *call) int { return oneLine(c, path.Dir) },
		"id":       func(_ context.Context, c *call) int { return say(c, "uid=0(root) gid=0(root) groups=0(root)") },
		"whoami":   func(_ context.Context, c *call) int { return say(c, "root") },
		"uname":    func(_ context.Context, c *call) int { return say(c, "Linux") },
		"ping":     ping,
		"nslookup": nslookup,
		"getent":   getent,
		"wget":     wget,
		"curl":     curl,
		"nc":       nc,
		"kill":     kill,
		"true":     func(context.Context, *call) int { return 0 },
		"false":    func(context.Context, *call) int { return 1 },
	}
}

func say(c *call, line string) int {
	fmt.Fprintln(c.hc.Stdout, line)
	return 0
}

func oneLine(c *call, f func(string) string) int {
	if len(c.args) < 2 {
		return c.fail("missing operand")
	}
	return say(c, f(c.args[1]))
}

// parseSleep reads sleep's operands: numbers with an optional s, m, h or d suffix, or "inf".
func parseSleep(args []string) (time.Duration, error) {
	if len(args) == 0 {
		return 0, errors.New("missing operand")
	}
	var total time.Duration
	for _, a := range args {
		if a == "inf" || a == "infinity" {
			return math.MaxInt64, nil
		}
		unit := time.Second
		num := a
		switch {
		case strings.HasSuffix(a, "s"):
			num = a[:len(a)-1]
		case strings.HasSuffix(a, "m"):
			num, unit = a[:len(a)-1], time.Minute
		case strings.HasSuffix(a, "h"):
			num, unit = a[:len(a)-1], time.Hour
		case strings.HasSuffix(a, "d"):
			num, unit = a[:len(a)-1], 24*time.Hour
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fmt.Errorf("invalid number '%s'", a)
		}
		if f*float64(unit) >= math.MaxInt64 {
			return math.MaxInt64, nil
		}
		total += time.Duration(f * float64(unit))
	}
	return total, nil
}

// sleep waits on the component clock; the process's end (SIGKILL, or SIGTERM when trapped)
// interrupts it.
func sleep(ctx context.Context, c *call) int {
	d, err := parseSleep(c.args[1:])
	if err != nil {
		return c.fail("%v", err)
	}
	if d == math.MaxInt64 {
		<-ctx.Done()
		return ExitKilled
	}
	if d <= 0 || c.p.env.Sleep(ctx, d) {
		return 0
	}
	return ExitKilled
}

func touch(_ context.Context, c *call) int {
	_, files := c.flags()
	return c.each(files, "missing file operand", "%s: %s", c.p.env.FS.Touch)
}

// each applies op to every operand's path; with no operand it fails with missing, and each
// failing operand is reported with failure (given the operand and the error's description).
func (c *call) each(operands []string, missing, failure string, op func(path string) error) int {
	if len(operands) == 0 {
		return c.fail("%s", missing)
	}
	status := 0
	for _, o := range operands {
		if err := op(c.path(o)); err != nil {
			status = c.fail(failure, o, describe(err))
		}
	}
	return status
}

// describe turns a filesystem error into the words coreutils print.
func describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "File exists"
	}
	msg := err.Error()
	return strings.ToUpper(msg[:1]) + msg[1:]
}

func (c *call) readInputs(files []string, each func(name string, data []byte) bool) int {
	status := 0
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" {
			if c.hc.Stdin != nil {
				data, err = io.ReadAll(c.hc.Stdin)
			}
		} else {
			data, err = c.p.env.FS.ReadFile(c.path(f))
		}
		if err != nil {
			status = c.fail("%s: %s", f, describe(err))
			continue
		}
		if !each(f, data) {
			break
		}
	}
	return status
}

func cat(_ context.Context, c *call) int {
	_, files := c.flags()
	return c.readInputs(files, func(_ string, data []byte) bool {
		_, _ = c.hc.Stdout.Write(data) // the container's output: a reader that went away is no error of cat's here
		return true
	})
}

func tee(_ context.Context, c *call) int {
	flags, files := c.flags()
	var data []byte
	if c.hc.Stdin != nil {
		data, _ = io.ReadAll(c.hc.Stdin) // what was read before an error is what tee copies
	}
	_, _ = c.hc.Stdout.Write(data) // the container's output, as cat's
	status := 0
	for _, f := range files {
		var err error
		if flags['a'] {
			var old []byte
			old, _ = c.p.env.FS.ReadFile(c.path(f)) // a missing file starts empty
			err = c.p.env.FS.WriteFile(c.path(f), append(old, data...))
		} else {
			err = c.p.env.FS.WriteFile(c.path(f), data)
		}
		if err != nil {
			status = c.fail("%s: %s", f, describe(err))
		}
	}
	return status
}

func rm(_ context.Context, c *call) int {
	flags, files := c.flags()
	recursive, force := flags['r'] || flags['R'], flags['f']
	if len(files) == 0 && !force {
		return c.fail("missing operand")
	}
	status := 0
	for _, f := range files {
		info, err := c.p.env.FS.Stat(c.path(f))
		switch {
		case err != nil && force:
		case err != nil:
			status = c.fail("can't remove '%s': %s", f, describe(err))
		case info.IsDir() && !recursive:
			status = c.fail("'%s' is a directory", f)
		default:
			if err := c.p.env.FS.Remove(c.path(f), recursive); err != nil {
				status = c.fail("can't remove '%s': %s", f, describe(err))
			}
		}
	}
	return status
}

func mkdir(_ context.Context, c *call) int {
	flags, dirs := c.flags()
	return c.each(dirs, "missing operand", "can't create directory '%s': %s",
		func(path string) error { return c.p.env.FS.Mkdir(path, 0o755, flags['p']) })
}

func rmdir(_ context.Context, c *call) int {
	_, dirs := c.flags()
	status := 0
	for _, d := range dirs {
		info, err := c.p.env.FS.Stat(c.path(d))
		if err == nil && !info.IsDir() {
			status = c.fail("'%s': Not a directory", d)
			continue
		}
		if err == nil {
			err = c.p.env.FS.Remove(c.path(d), false)
		}
		if err != nil {
			status = c.fail("'%s': %s", d, describe(err))
		}
	}
	return status
}

func ls(_ context.Context, c *call) int {
	flags, names := c.flags()
	if len(names) == 0 {
		names = []string{"."}
	}
	status := 0
	for _, name := range names {
		info, err := c.p.env.FS.Stat(c.path(name))
		if err != nil {
			fmt.Fprintf(c.hc.Stderr, "ls: %s: %s\n", name, describe(err))
			status = 2
			continue
		}
		if !info.IsDir() {
			fmt.Fprintln(c.hc.Stdout, name)
			continue
		}
		entries, _ := c.p.env.FS.ReadDir(c.path(name)) // a directory just stat'ed
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") && !flags['a'] {
				continue
			}
			if flags['l'] {
				i, _ := e.Info() // the vfs's entries always have their info
				fmt.Fprintf(c.hc.Stdout, "%s    1 root     root     %8d %s %s\n", i.Mode(), i.Size(), i.ModTime().UTC().Format("Jan  2 15:04"), e.Name())
				continue
			}
			fmt.Fprintln(c.hc.Stdout, e.Name())
		}
	}
	return status
}

func cp(_ context.Context, c *call) int {
	_, args := c.flags()
	if len(args) != 2 {
		return c.fail("need a source and a destination")
	}
	data, err := c.p.env.FS.ReadFile(c.path(args[0]))
	if err != nil {
		return c.fail("can't stat '%s': %s", args[0], describe(err))
	}
	dst := c.path(args[1])
	if info, err := c.p.env.FS.Stat(dst); err == nil && info.IsDir() {
		dst = path.Join(dst, path.Base(args[0]))
	}
	if err := c.p.env.FS.WriteFile(dst, data); err != nil {
		return c.fail("can't create '%s': %s", args[1], describe(err))
	}
	return 0
}

func mv(_ context.Context, c *call) int {
	_, args := c.flags()
	if len(args) != 2 {
		return c.fail("need a source and a destination")
	}
	if err := c.p.env.FS.Rename(c.path(args[0]), c.path(args[1])); err != nil {
		return c.fail("can't rename '%s': %s", args[0], describe(err))
	}
	return 0
}

// date prints the component clock's time: +FORMAT supports %s, %Y, %m, %d, %H, %M, %S and %%.
func date(_ context.Context, c *call) int {
	now := c.p.env.Clock.Now().UTC()
	for _, a := range c.args[1:] {
		if strings.HasPrefix(a, "+") {
			r := strings.NewReplacer("%s", strconv.FormatInt(now.Unix(), 10), "%Y", now.Format("2006"),
				"%m", now.Format("01"), "%d", now.Format("02"), "%H", now.Format("15"),
				"%M", now.Format("04"), "%S", now.Format("05"), "%N", fmt.Sprintf("%09d", now.Nanosecond()),
				"%F", now.Format("2006-01-02"), "%T", now.Format("15:04:05"), "%z", "+0000", "%Z", "UTC",
				"%y", now.Format("06"), "%b", now.Format("Jan"), "%a", now.Format("Mon"), "%j", fmt.Sprintf("%03d", now.YearDay()),
				"%%", "%")
			return say(c, r.Replace(a[1:]))
		}
	}
	return say(c, now.Format("Mon Jan  2 15:04:05 UTC 2006"))
}

// nmeter prints its format once per -d milliseconds (default 1000; 0 or less: without pause)
// until its output is closed or it is stopped. Of busybox's conversions it knows %t, the time
// of day, and %Nt with N (up to 6) decimal places of the second, and %%; the others report the
// host's CPU, memory and I/O counters, which the emulation has none of, and are refused.
func nmeter(ctx context.Context, c *call) int {
	delay := time.Second
	args := c.args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-d") {
		v := strings.TrimPrefix(args[0], "-d")
		args = args[1:]
		if v == "" {
			if len(args) == 0 {
				return c.fail("option requires an argument -- 'd'")
			}
			v, args = args[0], args[1:]
		}
		ms, err := strconv.Atoi(v)
		if err != nil {
			return c.fail("invalid number '%s'", v)
		}
		delay = time.Duration(max(ms, 0)) * time.Millisecond
	}
	if len(args) != 1 {
		return c.fail("usage: nmeter [-d MSEC] FORMAT")
	}
	render, err := nmeterFormat(args[0])
	if err != nil {
		return c.fail("%v", err)
	}
	for {
		if _, err := fmt.Fprintln(c.hc.Stdout, render(c.p.env.Clock.Now().UTC())); err != nil {
			return 1 // the reader went away (busybox dies of SIGPIPE)
		}
		if delay == 0 {
			if ctx.Err() != nil {
				return ExitKilled
			}
			continue
		}
		timer := c.p.env.Clock.NewTimer(delay)
		select {
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return ExitKilled
		}
	}
}

// nmeterFormat compiles an nmeter format into a function of the time.
func nmeterFormat(format string) (func(time.Time) string, error) {
	type part struct {
		text     string
		decimals int // of a time; -1 for text
	}
	var parts []part
	for rest := format; rest != ""; {
		i := strings.IndexByte(rest, '%')
		if i < 0 {
			parts = append(parts, part{rest, -1})
			break
		}
		parts = append(parts, part{rest[:i], -1})
		rest = rest[i+1:]
		digits := 0
		for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
			digits++
		}
		if digits == len(rest) {
			return nil, fmt.Errorf("format %q ends in a lone %%", format)
		}
		conv := rest[digits]
		switch {
		case conv == '%' && digits == 0:
			parts = append(parts, part{"%", -1})
		case conv == 't':
			n := 0
			if digits > 0 {
				n, _ = strconv.Atoi(rest[:digits]) // digits only, counted above
			}
			if n > 6 {
				return nil, fmt.Errorf("%%%st: at most 6 decimal places", rest[:digits])
			}
			parts = append(parts, part{decimals: n})
		default:
			return nil, fmt.Errorf("%%%c: restartbed's nmeter prints only the time (%%t, %%Nt); "+
				"an emulated container has no CPU, memory or I/O counters", conv)
		}
		rest = rest[digits+1:]
	}
	return func(now time.Time) string {
		var b strings.Builder
		for _, p := range parts {
			if p.decimals < 0 {
				b.WriteString(p.text)
				continue
			}
			b.WriteString(now.Format("15:04:05"))
			if p.decimals > 0 {
				fmt.Fprintf(&b, ".%0*d", p.decimals, now.Nanosecond()/int(math.Pow10(9-p.decimals)))
			}
		}
		return b.String()
	}, nil
}

func printEnv(_ context.Context, c *call) int {
	if len(c.args) > 1 && path.Base(c.args[0]) == "printenv" {
		status := 0
		for _, name := range c.args[1:] {
			if v := c.hc.Env.Get(name); v.IsSet() && v.Exported {
				fmt.Fprintln(c.hc.Stdout, v.String())
			} else {
				status = 1
			}
		}
		return status
	}
	for _, kv := range envList(c.hc.Env) {
		fmt.Fprintln(c.hc.Stdout, kv)
	}
	return 0
}

func hostname(_ context.Context, c *call) int { return say(c, c.p.env.Hostname) }

func seq(_ context.Context, c *call) int {
	nums := make([]int, 0, 3)
	for _, a := range c.args[1:] {
		n, err := strconv.Atoi(a)
		if err != nil {
			return c.fail("invalid number '%s'", a)
		}
		nums = append(nums, n)
	}
	first, step, last := 1, 1, 0
	switch len(nums) {
	case 1:
		last = nums[0]
	case 2:
		first, last = nums[0], nums[1]
	case 3:
		first, step, last = nums[0], nums[1], nums[2]
	default:
		return c.fail("missing operand")
	}
	if step == 0 {
		return c.fail("invalid increment 0")
	}
	for i := first; (step > 0 && i <= last) || (step < 0 && i >= last); i += step {
		fmt.Fprintln(c.hc.Stdout, i)
	}
	return 0
}

func wc(_ context.Context, c *call) int {
	flags, files := c.flags()
	all := !flags['l'] && !flags['w'] && !flags['c']
	return c.readInputs(files, func(name string, data []byte) bool {
		var out []string
		if all || flags['l'] {
			out = append(out, strconv.Itoa(bytes.Count(data, []byte("\n"))))
		}
		if all || flags['w'] {
			out = append(out, strconv.Itoa(len(strings.Fields(string(data)))))
		}
		if all || flags['c'] {
			out = append(out, strconv.Itoa(len(data)))
		}
		if name != "-" {
			out = append(out, name)
		}
		fmt.Fprintln(c.hc.Stdout, strings.Join(out, " "))
		return true
	})
}

// lineCount reads head's and tail's -n N (or -N); default 10.
func lineCount(args []string) (int, []string, error) {
	n := 10
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		if a == "-n" {
			if len(args) == 0 {
				return 0, nil, errors.New("option requires an argument -- 'n'")
			}
			a, args = "-"+args[0], args[1:]
		}
		v, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(a, "-n"), "-"))
		if err != nil {
			return 0, nil, fmt.Errorf("invalid number '%s'", a)
		}
		n = v
	}
	return n, args, nil
}

func lines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// head copies the first lines of each input as they come, so that `producer | head -n1` ends as
// soon as one line arrived (the producer then meets a closed pipe, as it would under busybox).
func head(_ context.Context, c *call) int {
	n, files, err := lineCount(c.args[1:])
	if err != nil {
		return c.fail("%v", err)
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	status := 0
	for _, f := range files {
		var in io.Reader
		if f == "-" {
			if c.hc.Stdin == nil {
				continue
			}
			in = c.hc.Stdin
		} else {
			data, err := c.p.env.FS.ReadFile(c.path(f))
			if err != nil {
				status = c.fail("%s: %s", f, describe(err))
				continue
			}
			in = bytes.NewReader(data)
		}
		r := bufio.NewReader(in)
		for range n {
			line, err := r.ReadString('\n')
			_, _ = io.WriteString(c.hc.Stdout, line)
			if err != nil {
				break
			}
		}
	}
	return status
}

func tail(_ context.Context, c *call) int {
	n, files, err := lineCount(c.args[1:])
	if err != nil {
		return c.fail("%v", err)
	}
	return c.readInputs(files, func(_ string, data []byte) bool {
		ls := lines(data)
		for _, l := range ls[max(0, len(ls)-n):] {
			fmt.Fprintln(c.hc.Stdout, l)
		}
		return true
	})
}

// grep matches extended regular expressions (Go's syntax), or fixed strings with -F; -q, -v, -c,
// -i and -E as usual. Exit 0 on a match, 1 on none, 2 on an error.
func grep(_ context.Context, c *call) int {
	flags, args := c.flags()
	if len(args) == 0 {
		fmt.Fprintln(c.hc.Stderr, "grep: missing pattern")
		return 2
	}
	pattern := args[0]
	if flags['F'] {
		pattern = regexp.QuoteMeta(pattern)
	}
	if flags['i'] {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		fmt.Fprintf(c.hc.Stderr, "grep: bad regex '%s': %v\n", args[0], err)
		return 2
	}
	matched := 0
	status := c.readInputs(args[1:], func(_ string, data []byte) bool {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if re.MatchString(sc.Text()) != flags['v'] {
				matched++
				switch {
				case flags['q'] || flags['c']:
				case flags['o'] && !flags['v']:
					for _, m := range re.FindAllString(sc.Text(), -1) {
						fmt.Fprintln(c.hc.Stdout, m) // -o: each match on a line of its own
					}
				default:
					fmt.Fprintln(c.hc.Stdout, sc.Text())
				}
			}
		}
		return true
	})
	if flags['c'] {
		fmt.Fprintln(c.hc.Stdout, matched)
	}
	switch {
	case status != 0:
		return 2
	case matched == 0:
		return 1
	}
	return 0
}
