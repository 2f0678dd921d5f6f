// Command ciphases turns the output of a CI run (.ci/run, or any make target) into the tables
// docs/development.md shows: every phase that hack/phase.sh timed, with its wall time, its CPU
// and the cores that makes, in the order the phases ended; then the test packages and upstream
// modules that took longest, from go test's own "ok" and "FAIL" lines.
//
//	.ci/run 2>&1 | tee ci.log
//	go run ./hack/ciphases ci.log
//
// It reads the files named, or standard input, and writes Markdown to standard output. A log
// with no phase line is an error: it did not come from a timed run.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// phaseLine is what hack/phase.sh prints when its command ends; make's and the upstream
// modules' prefixes may come before it.
var phaseLine = regexp.MustCompile(`phase (\S+): ([0-9.]+) s wall, ([0-9.]+) s CPU \([0-9.]+ cores\), exit ([0-9]+)$`)

// packageLine is go test's line for a package that ran: "ok", or "FAIL", a tab, the import path,
// a tab and the seconds it took (a cached result says "(cached)" and is not counted).
var packageLine = regexp.MustCompile(`(?:^|\s)(ok|FAIL)\s+(\S+)\s+([0-9.]+)s(?:\s|$)`)

// phase is one timed step of the run.
type phase struct {
	name      string
	wall, cpu time.Duration
	exit      int
}

// pkg is one test package's run.
type pkg struct {
	path   string
	took   time.Duration
	failed bool
}

// run is what a log says.
type run struct {
	phases   []phase
	packages []pkg
}

func main() {
	top := flag.Int("top", 15, "how many of the slowest test packages to list")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: ciphases [--top N] [LOG...]\n\nThe phase table of a CI run's output (hack/phase.sh's lines), as docs/development.md shows it.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var inputs []io.Reader
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ciphases: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		inputs = append(inputs, f)
	}
	if len(inputs) == 0 {
		inputs = append(inputs, os.Stdin)
	}
	r, err := parse(io.MultiReader(inputs...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "ciphases: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(r.markdown(*top))
}

// parse reads a log.
func parse(in io.Reader) (*run, error) {
	r := &run{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // test output can hold long lines
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimRight(sc.Text(), "\r")
		if m := phaseLine.FindStringSubmatch(text); m != nil {
			wall, err1 := seconds(m[2])
			cpu, err2 := seconds(m[3])
			exit, err3 := strconv.Atoi(m[4])
			if err := errors.Join(err1, err2, err3); err != nil {
				return nil, fmt.Errorf("line %d: %q: %w", line, text, err)
			}
			r.phases = append(r.phases, phase{name: m[1], wall: wall, cpu: cpu, exit: exit})
			continue
		}
		if m := packageLine.FindStringSubmatch(text); m != nil {
			took, err := seconds(m[3])
			if err != nil {
				return nil, fmt.Errorf("line %d: %q: %w", line, text, err)
			}
			r.packages = append(r.packages, pkg{path: m[2], took: took, failed: m[1] == "FAIL"})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.phases) == 0 {
		return nil, errors.New("no phase line (hack/phase.sh's \"phase NAME: ... s wall, ... s CPU ...\") in the log: was it a timed run (.ci/run)?")
	}
	return r, nil
}

func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}

// markdown is the phase table, then the top slowest packages.
func (r *run) markdown(top int) string {
	var b strings.Builder
	b.WriteString("| phase | wall | CPU | cores | exit |\n|---|---:|---:|---:|---:|\n")
	for _, p := range r.phases {
		cores := 0.0
		if p.wall > 0 {
			cores = p.cpu.Seconds() / p.wall.Seconds()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %d |\n", p.name, clock(p.wall), clock(p.cpu), cores, p.exit)
	}
	if len(r.packages) == 0 || top <= 0 {
		return b.String()
	}
	pkgs := slices.SortedStableFunc(slices.Values(r.packages), func(a, b pkg) int { return int(b.took - a.took) })
	pkgs = pkgs[:min(top, len(pkgs))]
	fmt.Fprintf(&b, "\n| slowest test packages (wall, as go test reports it) | took | result |\n|---|---:|---|\n")
	for _, p := range pkgs {
		result := "ok"
		if p.failed {
			result = "FAIL"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.path, clock(p.took), result)
	}
	return b.String()
}

// clock writes a duration as minutes and seconds, "12m05s", or seconds under a minute.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
