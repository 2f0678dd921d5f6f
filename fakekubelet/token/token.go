// Package token keeps the service-account tokens of pods' projected volumes as the kubelet's
// token manager does (pkg/kubelet/token, token_manager.go): one TokenRequest per pod, service
// account, audience and lifetime, reused until it is older than 80% of its lifetime or than 24
// hours (less a jitter of up to 10 s), then requested again; a failed renewal keeps the old
// token while it is valid. Tokens are forgotten with their pod, or once they expire.
//
// It reaches the apiserver only through the Request it is given and decides nothing about
// volumes: the kubelet asks which pods are Due on its sync period and writes the volumes again.
package token

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

const (
	// maxTTL is the age past which a token is renewed whatever its lifetime.
	maxTTL = 24 * time.Hour
	// maxJitter spreads the renewals of tokens issued together.
	maxJitter = 10 * time.Second
)

// Request asks the TokenRequest API for a token of the service account (the
// serviceaccounts/token subresource) in the pod's namespace, for the pod: as its node's kubelet.
type Request func(ctx context.Context, pod *corev1.Pod, serviceAccount string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// Options configure a Manager.
type Options struct {
	// Request reaches the apiserver. Required.
	Request Request
	// Clock tells a token's age. Default: the real clock.
	Clock clock.PassiveClock
	// Jitter is subtracted from each token's renewal time. Default: uniform in [0, 10 s), as the
	// kubelet's.
	Jitter func() time.Duration
}

// Manager is a cache of tokens. It is safe for concurrent use.
type Manager struct {
	opts Options

	mu sync.Mutex
	// tokens are held by pod, so that forgetting a pod does not go through every pod's.
	tokens map[types.UID]map[key]*entry
}

// key is what makes two projections ask for the same token (the kubelet's keyFunc).
type key struct {
	namespace, serviceAccount, audience string
	expirationSeconds                   int64
	pod                                 types.UID
}

type entry struct {
	token     string
	expires   time.Time
	renewFrom time.Time
}

// New validates the options and fills in defaults.
func New(opts Options) (*Manager, error) {
	if opts.Request == nil {
		return nil, errors.New("token: Options.Request is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Jitter == nil {
		opts.Jitter = func() time.Duration { return rand.N(maxJitter) }
	}
	return &Manager{opts: opts, tokens: map[types.UID]map[key]*entry{}}, nil
}

// Token returns a token of the pod's service account ("default" when it names none) for the
// audience (empty: the apiserver's), bound to the pod: the cached one until it is due for
// renewal, else a new one. A renewal that fails returns the old token while it is still valid,
// as the kubelet does; the kubelet's messages otherwise.
func (m *Manager) Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	k := key{namespace: pod.Namespace, serviceAccount: sa, audience: audience, expirationSeconds: expirationSeconds, pod: pod.UID}
	now := m.opts.Clock.Now()
	m.mu.Lock()
	cached := m.tokens[pod.UID][k]
	m.mu.Unlock()
	if cached != nil && now.Before(cached.renewFrom) {
		return cached.token, nil
	}

	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := m.opts.Request(ctx, pod, sa, req)
	switch {
	case err != nil && cached == nil:
		return "", fmt.Errorf("failed to fetch token: %w", err)
	case err != nil && !now.Before(cached.expires):
		return "", fmt.Errorf("token %s/%s for pod %s expired and refresh failed: %w", pod.Namespace, sa, pod.Name, err)
	case err != nil:
		return cached.token, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens[pod.UID] == nil {
		m.tokens[pod.UID] = map[key]*entry{}
	}
	m.tokens[pod.UID][k] = m.entry(tr, expirationSeconds)
	return tr.Status.Token, nil
}

// entry is a fresh token's cache entry: due from 80% of its lifetime, or 24 hours, less jitter.
// The lifetime is the one asked for; the apiserver may issue a longer-lived token but reports
// the expiry of the one asked for (--service-account-extend-token-expiration).
func (m *Manager) entry(tr *authenticationv1.TokenRequest, expirationSeconds int64) *entry {
	exp := tr.Status.ExpirationTimestamp.Time
	lifetime := time.Duration(expirationSeconds) * time.Second
	issued := exp.Add(-lifetime)
	renew := exp.Add(-lifetime / 5)
	if byAge := issued.Add(maxTTL); byAge.Before(renew) {
		renew = byAge
	}
	return &entry{token: tr.Status.Token, expires: exp, renewFrom: renew.Add(-m.opts.Jitter())}
}

// Due lists the pods that hold a token due for renewal: the kubelet writes their volumes again,
// which asks for new ones.
func (m *Manager) Due() []types.UID {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []types.UID
	for pod, tokens := range m.tokens {
		for _, e := range tokens {
			if !now.Before(e.renewFrom) {
				due = append(due, pod)
				break
			}
		}
	}
	return due
}

// Forget drops the tokens of a pod that is gone.
func (m *Manager) Forget(pod types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, pod)
}

// DropExpired drops the tokens that have expired (the kubelet's cleanup, each minute).
func (m *Manager) DropExpired() {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for pod, tokens := range m.tokens {
		maps.DeleteFunc(tokens, func(_ key, e *entry) bool { return !now.Before(e.expires) })
		if len(tokens) == 0 {
			delete(m.tokens, pod)
		}
	}
}
