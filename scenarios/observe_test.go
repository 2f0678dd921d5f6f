package scenarios

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
)

func object(kind, name string, rv int, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": kind,
		"metadata": map[string]any{"namespace": "ns", "name": name, "resourceVersion": fmt.Sprint(rv)}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func pod(name string, rv int, attempt string) *unstructured.Unstructured {
	u := object("Pod", name, rv, nil)
	_ = unstructured.SetNestedField(u.Object, attempt, "metadata", "annotations", "attempt")
	return u
}

func jobSet(rv int, current int64) *unstructured.Unstructured {
	return object("JobSet", "js", rv, map[string]any{"status": map[string]any{"current": current}})
}

// A waitFor sees a state that two watches delivered out of order: the JobSet update that followed
// the second pod update arrives before it, yet the state "two pods at attempt 1, current still 0"
// that the API held in between is seen.
func TestObserverOrdersWatchesByResourceVersion(t *testing.T) {
	const between = `pods.filter(p, p.metadata.annotations.attempt == "1").size() == 2 && jobsets[0].status.current == 0`
	const after = `pods.all(p, p.metadata.annotations.attempt == "1") && jobsets[0].status.current == 1`
	for _, tc := range []struct {
		name string
		expr string
		// changes after the start: variable and object, in the order the watches deliver them.
		changes []func(o *observer)
		want    bool
	}{{
		name: "in order",
		expr: between,
		changes: []func(o *observer){
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("b", 11, "1")) },
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("c", 12, "1")) },
			func(o *observer) { o.changed(varJobSets, "MODIFIED", jobSet(13, 1)) },
		},
		want: true,
	}, {
		name: "the JobSet's watch ahead of the pods'",
		expr: between,
		changes: []func(o *observer){
			func(o *observer) { o.changed(varJobSets, "MODIFIED", jobSet(13, 1)) },
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("b", 11, "1")) },
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("c", 12, "1")) },
		},
		want: true,
	}, {
		name: "the newest state after a late change",
		expr: after,
		changes: []func(o *observer){
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("b", 11, "1")) },
			func(o *observer) { o.changed(varJobSets, "MODIFIED", jobSet(13, 1)) },
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("c", 12, "1")) },
		},
		want: true,
	}, {
		name: "a pod deleted before the JobSet changed is gone from the view at the JobSet's version",
		expr: `pods.size() == 2 && jobsets[0].status.current == 1`,
		changes: []func(o *observer){
			func(o *observer) { o.changed(varPods, "MODIFIED", pod("b", 11, "1")) },
			func(o *observer) { o.changed(varJobSets, "MODIFIED", jobSet(13, 1)) },
			func(o *observer) { o.changed(varPods, "DELETED", pod("c", 12, "0")) },
		},
		want: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			o := newObserver(clk, nil, runVariables{})
			o.changed(varJobSets, "ADDED", jobSet(4, 0))
			for i, name := range []string{"a", "b", "c"} {
				o.changed(varPods, "ADDED", pod(name, 5+i, "0"))
			}
			o.changed(varPods, "MODIFIED", pod("a", 10, "1"))
			prg, err := compile(tc.expr, true)
			if err != nil {
				t.Fatal(err)
			}
			w := o.startWait(prg)
			for _, change := range tc.changes {
				clk.SetTime(clk.Now().Add(time.Millisecond))
				change(o)
			}
			if w.passed != tc.want {
				t.Errorf("%s: passed = %v after %d evaluations (last error %v), want %v", tc.expr, w.passed, w.evals, w.lastErr, tc.want)
			}
		})
	}
}

// Superseded versions are forgotten after historyWindow, and a deleted object with them.
func TestObserverForgetsOldVersions(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	o := newObserver(clk, nil, runVariables{})
	o.changed(varPods, "ADDED", pod("a", 1, "0"))
	o.changed(varPods, "MODIFIED", pod("a", 2, "1"))
	o.changed(varPods, "ADDED", pod("gone", 3, "0"))
	o.changed(varPods, "DELETED", pod("gone", 4, "0"))
	clk.SetTime(clk.Now().Add(historyWindow + time.Second))
	for i := range 1024 {
		o.changed(varEvents, "ADDED", object("Event", fmt.Sprint("e", i), 5+i, nil))
	}
	if got := len(o.history[varPods]["ns/a"]); got != 1 {
		t.Errorf("pod a keeps %d versions, want 1", got)
	}
	if _, ok := o.history[varPods]["ns/gone"]; ok {
		t.Errorf("the deleted pod's versions are kept after %v", historyWindow)
	}
}
