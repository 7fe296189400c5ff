package classify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

func TestClassify(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://x", Err: err} }
	tests := []struct {
		name   string
		status int
		err    error
		want   Result
	}{
		{"200", 200, nil, Result{Success, ""}},
		{"204", 204, nil, Result{Success, ""}},
		{"299", 299, nil, Result{Success, ""}},
		{"301 is a failure, not followed", 301, nil, Result{Retry, topics.FailureRedirect}},
		{"302", 302, nil, Result{Retry, topics.FailureRedirect}},
		{"304", 304, nil, Result{Retry, topics.FailureRedirect}},
		{"400", 400, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"401", 401, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"403", 403, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"404", 404, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"405", 405, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"413", 413, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"414", 414, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"415", 415, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"422", 422, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"410 disables", 410, nil, Result{Disable, topics.FailureGone}},
		{"408", 408, nil, Result{Retry, topics.FailureRetryable4xx}},
		{"425", 425, nil, Result{Retry, topics.FailureRetryable4xx}},
		{"429", 429, nil, Result{Retry, topics.FailureRateLimited}},
		{"409 other 4xx retried", 409, nil, Result{Retry, topics.FailureOther4xx}},
		{"500", 500, nil, Result{Retry, topics.FailureServerError}},
		{"503", 503, nil, Result{Retry, topics.FailureServerError}},
		{"599", 599, nil, Result{Retry, topics.FailureServerError}},
		{"101", 101, nil, Result{Retry, topics.FailureConnection}},
		{"deadline", 0, urlErr(context.DeadlineExceeded), Result{Retry, topics.FailureTimeout}},
		{"dns", 0, urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x"}}), Result{Retry, topics.FailureDNS}},
		{"refused", 0, urlErr(&net.OpError{Op: "dial", Err: errors.New("connection refused")}), Result{Retry, topics.FailureConnection}},
		{"tls", 0, urlErr(&tls.CertificateVerificationError{Err: errors.New("bad cert")}), Result{Retry, topics.FailureTLS}},
		{"blocked address", 0, urlErr(fmt.Errorf("dial: %w", ErrBlockedAddress)), Result{Dead, topics.FailureBlockedAddr}},
		{"no oauth2 token", 0, fmt.Errorf("%w: the token endpoint answered 401", ErrAuth), Result{Retry, topics.FailureAuth}},
		{"token endpoint on a refused address", 0, fmt.Errorf("%w: token endpoint: %w", ErrAuth, ErrBlockedAddress), Result{Dead, topics.FailureBlockedAddr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.status, tt.err); got != tt.want {
				t.Errorf("Classify(%d, %v) = %+v, want %+v", tt.status, tt.err, got, tt.want)
			}
		})
	}
}

func TestForSubscription(t *testing.T) {
	sub := &topics.Subscription{RetryStatuses: []int{404, 422}}
	tests := []struct {
		name   string
		sub    *topics.Subscription
		status int
		err    error
		want   Result
	}{
		{"listed permanent status retried", sub, 404, nil, Result{Retry, topics.FailurePermanent4xx}},
		{"other listed one", sub, 422, nil, Result{Retry, topics.FailurePermanent4xx}},
		{"unlisted permanent status dead", sub, 400, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"no list: dead", &topics.Subscription{}, 404, nil, Result{Dead, topics.FailurePermanent4xx}},
		{"410 still disables", &topics.Subscription{RetryStatuses: []int{404}}, 410, nil, Result{Disable, topics.FailureGone}},
		{"blocked address still dead", sub, 0, fmt.Errorf("dial: %w", ErrBlockedAddress), Result{Dead, topics.FailureBlockedAddr}},
		{"success", sub, 200, nil, Result{Success, topics.FailureNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := For(tt.sub, tt.status, tt.err); got != tt.want {
				t.Errorf("For(%v, %d, %v) = %+v, want %+v", tt.sub.RetryStatuses, tt.status, tt.err, got, tt.want)
			}
		})
	}
}
