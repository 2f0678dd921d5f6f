package token

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// apiserver issues numbered tokens valid for what is asked, or fails while down.
type apiserver struct {
	clock    *clocktesting.FakeClock
	issued   int
	down     bool
	requests []string
}

func (a *apiserver) request(_ context.Context, pod *corev1.Pod, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	namespace := pod.Namespace
	a.requests = append(a.requests, fmt.Sprintf("%s/%s aud=%v exp=%d pod=%s/%s", namespace, sa, tr.Spec.Audiences,
		*tr.Spec.ExpirationSeconds, tr.Spec.BoundObjectRef.Name, tr.Spec.BoundObjectRef.UID))
	if a.down {
		return nil, errors.New("connection refused")
	}
	a.issued++
	out := tr.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("t%d", a.issued),
		ExpirationTimestamp: metav1.NewTime(a.clock.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
	return out, nil
}

func newManager(t *testing.T) (*Manager, *apiserver) {
	t.Helper()
	api := &apiserver{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	m, err := New(Options{Request: api.request, Clock: api.clock, Jitter: func() time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return m, api
}

func pod(uid types.UID, sa string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-" + string(uid), UID: uid},
		Spec: corev1.PodSpec{ServiceAccountName: sa}}
}

func mustToken(t *testing.T, m *Manager, p *corev1.Pod, audience string, exp int64) string {
	t.Helper()
	tok, err := m.Token(context.Background(), p, audience, exp)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestRenewsAtEightyPercent: a token is reused until 80% of its lifetime has passed, then Due
// names its pod and the next read brings a new one.
func TestRenewsAtEightyPercent(t *testing.T) {
	m, api := newManager(t)
	p := pod("u1", "")
	if got := mustToken(t, m, p, "", 3600); got != "t1" {
		t.Fatalf("first token %q", got)
	}
	if want := []string{"ns/default aud=[] exp=3600 pod=p-u1/u1"}; !slices.Equal(api.requests, want) {
		t.Fatalf("requests %q, want %q", api.requests, want)
	}
	api.clock.Step(47*time.Minute + 59*time.Second) // 2879 s: just short of 80% of 3600 s
	if due := m.Due(); len(due) != 0 {
		t.Fatalf("due before 80%%: %v", due)
	}
	if got := mustToken(t, m, p, "", 3600); got != "t1" || api.issued != 1 {
		t.Fatalf("before 80%%: token %q after %d requests, want the cached t1", got, api.issued)
	}
	api.clock.Step(time.Second)
	if due := m.Due(); !slices.Equal(due, []types.UID{"u1"}) {
		t.Fatalf("due at 80%%: %v", due)
	}
	if got := mustToken(t, m, p, "", 3600); got != "t2" {
		t.Fatalf("at 80%%: token %q, want a new one", got)
	}
	if due := m.Due(); len(due) != 0 {
		t.Fatalf("due after renewal: %v", due)
	}
}

// TestRenewsAfterADay: a long-lived token is renewed once it is 24 hours old.
func TestRenewsAfterADay(t *testing.T) {
	m, _ := newManager(t)
	p := pod("u1", "sa")
	week := int64(7 * 24 * 3600)
	mustToken(t, m, p, "", week)
	m.opts.Clock.(*clocktesting.FakeClock).Step(24*time.Hour - time.Second)
	if due := m.Due(); len(due) != 0 {
		t.Fatalf("due before a day: %v", due)
	}
	m.opts.Clock.(*clocktesting.FakeClock).Step(time.Second)
	if got := mustToken(t, m, p, "", week); got != "t2" {
		t.Fatalf("after a day: %q", got)
	}
}

// TestKeys: pods, service accounts, audiences and lifetimes each have their own token.
func TestKeys(t *testing.T) {
	m, api := newManager(t)
	for _, ask := range []struct {
		pod      *corev1.Pod
		audience string
		exp      int64
	}{{pod("u1", ""), "", 3600}, {pod("u1", ""), "vault", 3600}, {pod("u1", ""), "", 7200}, {pod("u2", ""), "", 3600},
		{pod("u3", "builder"), "", 3600}, {pod("u1", ""), "", 3600}} {
		mustToken(t, m, ask.pod, ask.audience, ask.exp)
	}
	if api.issued != 5 {
		t.Fatalf("%d tokens issued, want 5 (the last ask is the first's):\n%q", api.issued, api.requests)
	}
	if want := "ns/builder aud=[] exp=3600 pod=p-u3/u3"; api.requests[4] != want {
		t.Fatalf("request %q, want %q", api.requests[4], want)
	}
	m.Forget("u1")
	api.clock.Step(time.Hour)
	if due := m.Due(); len(due) != 2 || slices.Contains(due, "u1") {
		t.Fatalf("due after u1 was forgotten: %v", due)
	}
	m.DropExpired()
	if due := m.Due(); len(due) != 0 {
		t.Fatalf("expired tokens kept: %v", due)
	}
}

// TestFailedRenewal: a renewal that fails keeps the old token while it is valid; then, and for
// a first request, it is the kubelet's error.
func TestFailedRenewal(t *testing.T) {
	m, api := newManager(t)
	p := pod("u1", "")
	api.down = true
	if _, err := m.Token(context.Background(), p, "", 3600); err == nil || err.Error() != "failed to fetch token: connection refused" {
		t.Fatalf("first request while the apiserver is down: %v", err)
	}
	api.down = false
	mustToken(t, m, p, "", 3600)
	api.down = true
	api.clock.Step(50 * time.Minute)
	if got := mustToken(t, m, p, "", 3600); got != "t1" {
		t.Fatalf("a failed renewal gave %q, want the old token", got)
	}
	api.clock.Step(10 * time.Minute)
	if _, err := m.Token(context.Background(), p, "", 3600); err == nil || err.Error() != "token ns/default for pod p-u1 expired and refresh failed: connection refused" {
		t.Fatalf("a failed renewal of an expired token: %v", err)
	}
}

// TestJitter: the renewal comes up to the jitter early.
func TestJitter(t *testing.T) {
	api := &apiserver{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	m, err := New(Options{Request: api.request, Clock: api.clock, Jitter: func() time.Duration { return 9 * time.Second }})
	if err != nil {
		t.Fatal(err)
	}
	mustToken(t, m, pod("u1", ""), "", 600)
	api.clock.Step(480*time.Second - 9*time.Second)
	if due := m.Due(); len(due) != 1 {
		t.Fatalf("not due 9 s before 80%% with a 9 s jitter: %v", due)
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("a manager without Request")
	}
}
