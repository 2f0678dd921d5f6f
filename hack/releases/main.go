// Command releases writes what restartbed knows of each supported Kubernetes release:
// envtest/controlplane/releases/<minor>/{kubernetes,etcd}.{mod,sum}, the Go modules from which
// the release's control plane is built, and featuregates.json, the release's feature gates.
// `make generate` runs it with the versions the Makefile names; everything about a release that
// restartbed builds is read from these files.
//
// For each version it reads k8s.io/kubernetes's own go.mod (its go directive and the staging
// modules it replaces with ./staging) and build/dependencies.yaml (the etcd the release ships
// and tests with), writes a module that requires k8s.io/kubernetes at that version with every
// staging module pinned to the matching v0 version, and a separate module for etcd, so that
// neither changes the other's dependencies. Both are tidied with the thin mains of
// envtest/controlplane/mains in place. Then it builds featuregates.go (beside this file) in the
// Kubernetes module and keeps what it prints.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

const (
	kubernetesModule = "k8s.io/kubernetes"
	etcdModule       = "go.etcd.io/etcd/server/v3"
)

// kubernetesTools are the upstream commands built as they are; the mains of envtest/controlplane/mains are the others.
var kubernetesTools = []string{kubernetesModule + "/cmd/kube-apiserver", kubernetesModule + "/cmd/kube-scheduler"}

func main() {
	out := flag.String("out", "envtest/controlplane/releases", "directory of the releases' modules")
	mains := flag.String("mains", "envtest/controlplane/mains", "directory of restartbed's thin mains")
	dumpers := flag.String("dumpers", "hack/releases", "directory of the dumpers (featuregates.go, nodefeatures.go), each written to <name>.json")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: releases [-out DIR] [-mains DIR] v1.X.Y...")
		os.Exit(2)
	}
	for _, v := range flag.Args() {
		if err := write(v, *out, *mains, *dumpers); err != nil {
			fmt.Fprintf(os.Stderr, "releases: %s: %v\n", v, err)
			os.Exit(1)
		}
	}
}

func write(version, out, mains, dumpers string) error {
	if !semver.IsValid(version) || semver.Prerelease(version) != "" || !strings.HasPrefix(version, "v1.") {
		return fmt.Errorf("not a Kubernetes release version (want v1.X.Y)")
	}
	dir, err := download(kubernetesModule + "@" + version)
	if err != nil {
		return err
	}
	upstreamMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	upstream, err := modfile.Parse("go.mod", upstreamMod, nil)
	if err != nil {
		return err
	}
	etcd, err := etcdVersion(filepath.Join(dir, "build", "dependencies.yaml"))
	if err != nil {
		return err
	}
	staging := "v0." + strings.TrimPrefix(version, "v1.")
	minor := semver.MajorMinor(version)

	kube := &modfile.File{}
	must(kube.AddModuleStmt("restartbed.localhost/controlplane/kubernetes"))
	must(kube.AddGoStmt(upstream.Go.Version))
	must(kube.AddRequire(kubernetesModule, version))
	for _, t := range kubernetesTools {
		must(kube.AddTool(t))
	}
	for _, r := range upstream.Replace {
		if strings.HasPrefix(r.New.Path, "./staging/") {
			must(kube.AddReplace(r.Old.Path, "", r.Old.Path, staging))
		}
	}
	target := filepath.Join(out, minor)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	var dumps []string
	for _, name := range []string{"featuregates.go", "nodefeatures.go"} {
		dumps = append(dumps, filepath.Join(dumpers, name))
	}
	if err := tidy(kube, mains, dumps, filepath.Join(target, "kubernetes")); err != nil {
		return fmt.Errorf("kubernetes module: %w", err)
	}

	e := &modfile.File{}
	must(e.AddModuleStmt("restartbed.localhost/controlplane/etcd"))
	must(e.AddGoStmt(upstream.Go.Version))
	must(e.AddRequire(etcdModule, "v"+etcd))
	must(e.AddTool(etcdModule))
	if err := tidy(e, "", nil, filepath.Join(target, "etcd")); err != nil {
		return fmt.Errorf("etcd module: %w", err)
	}
	fmt.Printf("%s: Kubernetes %s (staging %s), etcd v%s\n", target, version, staging, etcd)
	return nil
}

// tidy writes f with the mains beside it into a scratch module, tidies it and saves its go.mod
// and go.sum as base.mod and base.sum. It also builds and runs each dumper there and saves its
// output as <name>.json beside base.
func tidy(f *modfile.File, mains string, dumpers []string, base string) error {
	scratch, err := os.MkdirTemp("", "restartbed-releases-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	f.Cleanup()
	data, err := f.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(scratch, "go.mod"), data, 0o644); err != nil {
		return err
	}
	if mains != "" {
		entries, err := os.ReadDir(mains)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				if err := addMain(scratch, filepath.Join(mains, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	for _, d := range dumpers {
		if err := addMain(scratch, d); err != nil {
			return err
		}
	}
	if _, err := goCmd(scratch, "mod", "tidy"); err != nil {
		return err
	}
	for _, d := range dumpers {
		name := strings.TrimSuffix(filepath.Base(d), ".go")
		if _, err := goCmd(scratch, "build", "-trimpath", "-o", filepath.Join(scratch, "bin", name), "./"+name); err != nil {
			return err
		}
		out, err := exec.Command(filepath.Join(scratch, "bin", name)).Output()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(base), name+".json"), out, 0o644); err != nil {
			return err
		}
	}
	for _, ext := range []string{"mod", "sum"} {
		data, err := os.ReadFile(filepath.Join(scratch, "go."+ext))
		if err != nil {
			return err
		}
		if err := os.WriteFile(base+"."+ext, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// addMain copies a main package file (which carries an ignore build tag, so that the package it
// lives beside does not compile it) into its own package of the scratch module.
func addMain(scratch, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(src), ".go")
	data = []byte(strings.Replace(string(data), "//go:build ignore\n", "", 1))
	if err := os.MkdirAll(filepath.Join(scratch, name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(scratch, name, "main.go"), data, 0o644)
}

func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

func download(module string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if info.Error != "" {
		return "", errors.New(info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	return info.Dir, nil
}

// etcdVersion reads the etcd version a release ships with from its build/dependencies.yaml.
func etcdVersion(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var deps struct {
		Dependencies []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"dependencies"`
	}
	if err := yaml.Unmarshal(data, &deps); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range deps.Dependencies {
		if d.Name == "etcd" {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s names no etcd", path)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
