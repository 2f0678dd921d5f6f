package container

import "testing"

func TestInstancesNewestFirst(t *testing.T) {
	ps := &PodStatus{Containers: []Status{
		{ID: "w2", Name: "worker", Attempt: 2}, {ID: "a1", Name: "agent", Attempt: 1},
		{ID: "w1", Name: "worker", Attempt: 1}, {ID: "w0", Name: "worker"},
	}}
	if got := ps.Latest("worker"); got == nil || got.ID != "w2" {
		t.Errorf("Latest(worker) = %+v, want w2", got)
	}
	if got := ps.Previous("worker"); got == nil || got.ID != "w1" {
		t.Errorf("Previous(worker) = %+v, want w1", got)
	}
	if got := ps.Previous("agent"); got != nil {
		t.Errorf("Previous(agent) = %+v, want none: it has one instance", got)
	}
	if got := len(ps.Instances("worker")); got != 3 {
		t.Errorf("%d instances of worker, want 3", got)
	}
	var none *PodStatus // a pod the runtime does not know
	if none.Latest("worker") != nil || none.Previous("worker") != nil {
		t.Error("a nil PodStatus has instances")
	}
	if id := (&Status{ID: "abc"}).ContainerID(); id != "containerd://abc" {
		t.Errorf("ContainerID = %q", id)
	}
}
