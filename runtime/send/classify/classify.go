// Package classify turns the result of one HTTP attempt into what happens
// next: success, retry, dead letter, or disabling the subscription.
package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"

	"github.com/hookpipe/hookpipe/topics"
)

// Action is what the deliverer does after an attempt.
type Action int

const (
	// Success is a 2xx: the delivery is done.
	Success Action = iota
	// Retry is a transient failure: the delivery goes to a retry tier.
	Retry
	// Dead is a permanent failure: the delivery goes to the dlq at once.
	Dead
	// Disable is 410 Gone: the subscription is disabled and the delivery
	// dead-lettered.
	Disable
	// Skip is a delivery its transformation cancelled: nothing was sent,
	// and nothing is left to do.
	Skip
)

func (a Action) String() string {
	return [...]string{"success", "retry", "dead", "disable", "skip"}[a]
}

// Result is the classification of one attempt.
type Result struct {
	Action   Action
	Category string // a topics.Failure* constant
}

// ErrBlockedAddress is returned by the dialer when the destination address
// is not allowed (SSRF guard); such attempts are permanent failures.
var ErrBlockedAddress = errors.New("destination address is not allowed")

// ErrAuth is returned when the endpoint's auth could not be used (its
// OAuth2 token endpoint refused or failed, say): retried, as the endpoint's
// owner can fix it.
var ErrAuth = errors.New("endpoint auth failed")

// ErrRefused is returned when a destination other than an HTTP endpoint
// refused a message in a way retrying cannot change: no such topic, queue
// or exchange, access denied. Such attempts are dead-lettered at once.
var ErrRefused = errors.New("destination refused the message")

// ErrTransformation is returned when the subscription's transformation
// threw, went over a limit or returned a bad webhook: dead-lettered at
// once, as sending it again runs the same script on the same event.
var ErrTransformation = errors.New("transformation failed")

// ErrCancelled is returned when the subscription's transformation
// cancelled the delivery.
var ErrCancelled = errors.New("transformation cancelled the delivery")

// Classify maps an HTTP status (0 when there was no response) and the
// transport error to a Result. A permanent status goes straight to the dlq
// unless the subscription retries it (see For).
func Classify(status int, err error) Result {
	if errors.Is(err, ErrBlockedAddress) {
		// The guard will refuse it again: retrying only delays the dlq.
		return Result{Dead, topics.FailureBlockedAddr}
	}
	if errors.Is(err, ErrCancelled) {
		return Result{Skip, topics.FailureCancelled}
	}
	if errors.Is(err, ErrTransformation) {
		return Result{Dead, topics.FailureTransform}
	}
	if errors.Is(err, ErrRefused) {
		return Result{Dead, topics.FailureRefused}
	}
	if errors.Is(err, ErrAuth) {
		return Result{Retry, topics.FailureAuth}
	}
	if err != nil {
		return Result{Retry, errorCategory(err)}
	}
	switch {
	case status >= 200 && status < 300:
		return Result{Success, topics.FailureNone}
	case status == 410:
		return Result{Disable, topics.FailureGone}
	case topics.PermanentStatus(status):
		return Result{Dead, topics.FailurePermanent4xx}
	case status == 429:
		return Result{Retry, topics.FailureRateLimited}
	case status == 408 || status == 425:
		return Result{Retry, topics.FailureRetryable4xx}
	case status >= 500:
		return Result{Retry, topics.FailureServerError}
	case status >= 300 && status < 400:
		return Result{Retry, topics.FailureRedirect}
	case status >= 400:
		return Result{Retry, topics.FailureOther4xx}
	default: // 1xx or nonsense: the endpoint did not accept the delivery
		return Result{Retry, topics.FailureConnection}
	}
}

func errorCategory(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return topics.FailureTimeout
	case errors.As(err, &dnsErr):
		return topics.FailureDNS
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return topics.FailureTLS
	case errors.As(err, &netErr) && netErr.Timeout():
		return topics.FailureTimeout
	default:
		return topics.FailureConnection
	}
}

// For classifies an attempt for a subscription: as Classify, except that a
// permanent status the subscription lists in retry_statuses is retried,
// and a destination that acknowledged (no error) took the delivery.
func For(sub *topics.Subscription, status int, err error) Result {
	if err == nil && !sub.Destination.IsHTTP() {
		// A destination answers with an acknowledgement, not a status.
		return Result{Success, topics.FailureNone}
	}
	res := Classify(status, err)
	if res.Action == Dead && res.Category == topics.FailurePermanent4xx && sub.Retries(status) {
		res.Action = Retry
	}
	return res
}
