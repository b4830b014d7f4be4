package main

// The metrics endpoint's authentication and authorization, as kubebuilder's
// scaffold has them (controller-runtime's filters.WithAuthenticationAndAuthorization):
// the API server reviews the scraper's bearer token (TokenReview) and whether
// that user may get the URL (SubjectAccessReview). Written here on client-go
// because controller-runtime's filter links k8s.io/apiserver, and with it
// CEL, gRPC and OpenTelemetry: a binary twice the size, whose pages an idle
// operator's resident memory carried (BENCHMARKS.md, memory), for two API calls.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// A scraper comes back every 15 to 60 s: an answer is remembered long
	// enough to spare most of its reviews, and briefly, so that a revoked
	// token or RoleBinding stops working soon (the times of controller-runtime's
	// filter: a minute for a token, 30 s for a refusal).
	allowedFor = time.Minute
	refusedFor = 30 * time.Second
	// reviewTimeout bounds a scrape that waits on a slow API server.
	reviewTimeout = 10 * time.Second
	// maxRemembered bounds the memory that made-up tokens can cost.
	maxRemembered = 1024
)

// metricsAuth is a metricsserver.Options.FilterProvider.
func metricsAuth(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	g, err := newGate(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return g.filter, nil
}

func newGate(cfg *rest.Config, httpClient *http.Client) (*gate, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	return &gate{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now, answers: map[answerKey]answer{}}, nil
}

// filter is a metricsserver.Filter: next serves only the requests let through.
func (g *gate) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		code, msg, err := g.decide(req)
		if err != nil {
			log.Error(err, "Reviewing a metrics request", "path", req.URL.Path)
		}
		if code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// gate decides requests through the API server's reviews, remembering answers.
type gate struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu      sync.Mutex
	answers map[answerKey]answer
}

// answerKey holds the token's digest, never the token.
type answerKey struct {
	token      [sha256.Size]byte
	verb, path string
}

type answer struct {
	code    int
	msg     string
	expires time.Time
}

// decide answers 200 to let the request through, or the status and message to
// refuse it with; err is a review that failed (500), for the log.
func (g *gate) decide(req *http.Request) (int, string, error) {
	token, ok := bearerToken(req)
	if !ok {
		return http.StatusUnauthorized, "Unauthorized", nil
	}
	key := answerKey{token: sha256.Sum256([]byte(token)), verb: strings.ToLower(req.Method), path: req.URL.Path}
	now := g.now()
	g.mu.Lock()
	a, known := g.answers[key]
	g.mu.Unlock()
	if known && now.Before(a.expires) {
		return a.code, a.msg, nil
	}

	ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
	defer cancel()
	a, err := g.review(ctx, token, key)
	if err != nil {
		return http.StatusInternalServerError, "Authentication or authorization failed", err
	}
	a.expires = now.Add(refusedFor)
	if a.code == http.StatusOK {
		a.expires = now.Add(allowedFor)
	}
	g.remember(key, a)
	return a.code, a.msg, nil
}

// review asks the API server who the token is and whether they may do it.
func (g *gate) review(ctx context.Context, token string, key answerKey) (answer, error) {
	tr, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return answer{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return answer{code: http.StatusUnauthorized, msg: "Unauthorized"}, nil
	}
	user := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: key.verb, Path: key.path},
	}}, metav1.CreateOptions{})
	if err != nil {
		return answer{}, fmt.Errorf("SubjectAccessReview for %s: %w", user.Username, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return answer{code: http.StatusForbidden, msg: fmt.Sprintf("Authorization denied for user %s", user.Username)}, nil
	}
	return answer{code: http.StatusOK}, nil
}

// remember keeps an answer; when full, it first forgets the expired ones, and
// all of them if none has expired.
func (g *gate) remember(key answerKey, a answer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.answers) >= maxRemembered {
		now := g.now()
		for k, old := range g.answers {
			if !now.Before(old.expires) {
				delete(g.answers, k)
			}
		}
		if len(g.answers) >= maxRemembered {
			clear(g.answers)
		}
	}
	g.answers[key] = a
}

// bearerToken reads "Authorization: Bearer <token>" as kube-apiserver does.
func bearerToken(req *http.Request) (string, bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token, _, _ := strings.Cut(rest, " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}
