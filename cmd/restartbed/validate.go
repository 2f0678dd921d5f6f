package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/restartbed/restartbed/envtest"
	"github.com/restartbed/restartbed/envtest/controlplane"
	"github.com/restartbed/restartbed/timing"
	"github.com/restartbed/restartbed/validate"
)

type validateFlags struct {
	output       string
	dryRun       bool
	drill        bool
	drillTimeout time.Duration
	drillTiming  string
	featureGates map[string]bool
	version      string
	// drillAgent is the host executable the drill runs as its agents; allowBinaries the opt-in.
	drillAgent    string
	allowBinaries bool
}

func newValidateCommand() *cobra.Command {
	f := validateFlags{featureGates: map[string]bool{}}
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check JobSet, Job, Pod, RBAC and policy manifests against what a cluster with JobSet v0.12 does",
		Long: `validate reads manifests (a directory stands for its *.yaml and *.yml files) and reports, before
anything is deployed, what a Kubernetes cluster (--kubernetes-version, default the newest supported)
with JobSet v0.12 would refuse or mis-handle:

  parse      YAML syntax and tabs, placeholders design documents use ("...", X, <CHANGE ME>),
             unknown or wrongly cased keys (Spec:), values of the wrong kind
  draft      names from the KEP drafts that shipped under another name (RestartPod, NoIn,
             Terminate, onExit, PodRestartInPlace, the epoch fields and annotation, the agent's
             draft variables, Kueue's old annotation), each with the released name
  apiserver  a server-side dry-run on an embedded kube-apiserver of that release with JobSet's CRD and
             webhook, in the apiserver's own words; each JobSet's child Jobs too, as the
             controller would create them
  readiness  what in-place restart needs and nothing else checks: the agent sidecar, its rules,
             its startup probe against its environment, the workers' rules, and the agent's
             service account, Role and binding when the files hold RBAC

Placeholders and draft names are reported, then replaced in a copy so that the other checks still
judge the rest. Each finding is one line, FILE:LINE: error|warning: FIELD.PATH: message.

--drill then runs the manifests on emulated nodes (the agent containers as restartbed's builtin
agent, the workers' own commands), makes one worker exit, and reports whether the group restart
completes and how long it took. --drill-agent-binary PATH runs that host executable as the agents
instead (upstream JobSet's in-place-restart agent, say); it needs --allow-host-binaries and root
(docs/host-binaries.md).

Exit status: 0 no errors (warnings allowed); 1 an error was found or the drill failed; 2 bad flags.
Every check is documented in docs/validate.md.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "text" && f.output != "json" {
				return exitError{code: exitInvalid, err: fmt.Errorf("-o must be text or json, got %q", f.output)}
			}
			release, err := resolveRelease(f.version)
			if err != nil {
				return err
			}
			if _, err := envtest.ResolveFeatureGates(release, f.featureGates); err != nil {
				return exitError{code: exitInvalid, err: fmt.Errorf("--feature-gates: %w", err)}
			}
			if _, err := timing.ByName(f.drillTiming); err != nil {
				return exitError{code: exitInvalid, err: fmt.Errorf("--drill-timing: %w", err)}
			}
			if f.drill && !f.dryRun {
				return exitError{code: exitInvalid, err: fmt.Errorf("--drill needs the dry-run: drop --dry-run=false")}
			}
			if f.drillAgent != "" {
				if !f.drill {
					return exitError{code: exitInvalid, err: fmt.Errorf("--drill-agent-binary needs --drill")}
				}
				if f.drillAgent, err = hostBinaryFlag("--drill-agent-binary", f.drillAgent, f.allowBinaries); err != nil {
					return exitError{code: exitInvalid, err: err}
				}
			}
			return runValidate(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args, f)
		},
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "text, or json (findings, counts and the drill's result)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", true, "send the manifests to the embedded apiserver (server-side dry-run); false checks offline")
	cmd.Flags().Var(cliflag.NewMapStringBool(&f.featureGates), "feature-gates",
		"gates of the dry-run apiserver (and the drill's kubelets), merged over restartbed's defaults: A=true,B=false")
	addKubernetesVersionFlag(cmd.Flags(), &f.version)
	cmd.Flags().BoolVar(&f.drill, "drill", false, "run the manifests on emulated nodes, crash one worker and time the group restart")
	cmd.Flags().StringVar(&f.drillTiming, "drill-timing", timing.Realistic().Name,
		fmt.Sprintf("timing profile of the drill's cluster: %s", strings.Join(timing.Names(), " or ")))
	cmd.Flags().DurationVar(&f.drillTimeout, "drill-timeout", 3*time.Minute, "how long the drill waits for the pods to start and for the group restart")
	cmd.Flags().StringVar(&f.drillAgent, "drill-agent-binary", "", "run this host executable as the drill's agent containers (needs --allow-host-binaries)")
	cmd.Flags().BoolVar(&f.allowBinaries, "allow-host-binaries", false, "let the drill run a host executable (--drill-agent-binary; needs root; docs/host-binaries.md)")
	return cmd
}

func runValidate(ctx context.Context, out, progress io.Writer, paths []string, f validateFlags) error {
	opts := validate.Options{
		DryRun:  f.dryRun,
		Cluster: envtest.Options{Assets: controlplane.Options{Progress: progress}, Logger: &logger, FeatureGates: f.featureGates, KubernetesVersion: f.version},
	}
	if f.drill {
		opts.Drill = &validate.DrillOptions{Timeout: f.drillTimeout, Timing: f.drillTiming, AgentBinary: f.drillAgent}
	}
	rep, err := validate.Run(ctx, paths, opts)
	if err != nil {
		return exitError{code: exitFailed, err: err}
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, finding := range rep.Findings {
			fmt.Fprintln(out, finding)
		}
		fmt.Fprintln(out, summary(rep))
	}
	if rep.Count(validate.Error) > 0 || rep.Drill != nil && !rep.Drill.Passed() {
		return exitError{code: exitFailed}
	}
	return nil
}

// summary is the last line of the text report.
func summary(rep *validate.Report) string {
	s := fmt.Sprintf("%d error(s), %d warning(s) in %d manifest(s)", rep.Count(validate.Error), rep.Count(validate.Warning), rep.Documents)
	if rep.DryRunSkipped != "" {
		s += "; dry-run: " + rep.DryRunSkipped
	} else {
		s += fmt.Sprintf("; the apiserver accepted %d of %d", rep.DryRun, rep.Documents)
		s += gatesNote(rep)
	}
	if rep.Drill != nil {
		s += "\n" + rep.Drill.String()
	}
	return s
}

// gatesNote says which release the dry-run checked against, and which gates a cluster of that
// release must turn on for what restartbed turned on.
func gatesNote(rep *validate.Report) string {
	if len(rep.FeatureGates) == 0 {
		return fmt.Sprintf("\nchecked against Kubernetes %s with its default feature gates", rep.KubernetesVersion)
	}
	s := fmt.Sprintf("\nchecked against Kubernetes %s with feature gates %s", rep.KubernetesVersion, envtest.FormatFeatureGates(rep.FeatureGates))
	var on []string
	for name, enabled := range rep.FeatureGates {
		if enabled {
			on = append(on, name)
		}
	}
	if len(on) > 0 {
		slices.Sort(on)
		off := make([]string, len(on))
		for i, name := range on {
			off[i] = name + "=false"
		}
		s += fmt.Sprintf("; %s are off by default in %s, so a target cluster's apiserver and kubelets need them turned on (--feature-gates %s shows what a cluster without them says)",
			strings.Join(on, " and "), rep.KubernetesVersion, strings.Join(off, ","))
	}
	return s
}
