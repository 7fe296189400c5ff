package send

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/topics"
)

// sqsDestination is the queue q (the test endpoint takes any credentials).
func sqsDestination(q *queuetest.Queue) *topics.Destination {
	return &topics.Destination{Type: topics.DestinationSQS, URL: q.URL, Region: queuetest.SQSRegion,
		AccessKeyID: "hookpipe", SecretAccessKey: "hookpipe-secret"}
}

// TestSQSDestination: deliveries to an SQS FIFO queue carry the body an
// endpoint gets and the Standard Webhooks headers as attributes, which
// verify as a receiver would verify them; a key's messages are one
// message group, in order, and a second attempt of a delivery the queue
// already has is dropped (the webhook-id is the deduplication id).
func TestSQSDestination(t *testing.T) {
	t.Parallel()
	q := queuetest.NewQueue(t, queuetest.SQS(t), true)
	sub := destinationSub(t, sqsDestination(q))
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	ids := []string{"evt_1", "evt_2", "evt_3", "evt_4"}
	sendKeyed(t, s, &sub, "customer-7", ids...)
	sendKeyed(t, s, &sub, "customer-7", "evt_1") // a retry of one the queue has

	for i, m := range q.Read(t, len(ids), 20*time.Second) {
		h := sqsHeader(m)
		verify(t, h, []byte(aws.ToString(m.Body)), sub.Secret)
		if got := h.Get("webhook-id"); got != ids[i] {
			t.Errorf("message %d is %s, want %s: a key's messages in order", i, got, ids[i])
		}
		group, dedup := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
			m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
		if group != "customer-7" || dedup != ids[i] || h.Get("X-Tenant") != "acme" || h.Get("Content-Type") != "application/json" {
			t.Errorf("message %s: group %q, deduplication id %q, attributes %v: want the key, the webhook-id, "+
				"the subscription's headers and the content type", ids[i], group, dedup, h)
		}
	}
	if n := q.Count(t); n != 0 {
		t.Errorf("%d messages left: want a retry dropped", n)
	}
}

// TestSQSAttributes: a message to a standard queue with as many headers as
// a subscription may have carries them all and the signing ones, the
// trace context left out as SQS takes no more.
func TestSQSAttributes(t *testing.T) {
	t.Parallel()
	q := queuetest.NewQueue(t, queuetest.SQS(t), false)
	sub := destinationSub(t, sqsDestination(q))
	sub.Headers = map[string]string{"X-A": "a", "X-B": "b", "X-C": "c", "X-D": "d", "X-E": "e", "X-F": "f"}
	if err := sub.Validate(); err != nil {
		t.Fatal(err)
	}
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	d := newDelivery(sub.ID, "evt_1")
	resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &d, []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		{Key: "tracestate", Value: []byte("vendor=1")}})
	if res := classify.For(&sub, resp.Status, err); res.Action != classify.Success {
		t.Fatalf("send: %v (%v)", res, err)
	}
	m := q.Read(t, 1, 20*time.Second)[0]
	h := sqsHeader(m)
	verify(t, h, []byte(aws.ToString(m.Body)), sub.Secret)
	if len(m.MessageAttributes) != 10 || h.Get("X-F") != "f" || h.Get("Traceparent") != "" {
		t.Errorf("attributes %v: want the 6 headers and the 4 signing ones, without the trace context", h)
	}
}

func sqsHeader(m types.Message) http.Header {
	h := http.Header{}
	for k, v := range m.MessageAttributes {
		h.Add(k, aws.ToString(v.StringValue))
	}
	return h
}

// TestSQSDestinationRefusals: what retrying cannot change is dead at once
// (a queue that does not exist, an endpoint the SSRF guard refuses), and
// an endpoint that is down is retried.
func TestSQSDestinationRefusals(t *testing.T) {
	t.Parallel()
	q := queuetest.NewQueue(t, queuetest.SQS(t), false)
	down := closedPort(t)
	testRefusals(t, func(*testing.T) *topics.Destination { return sqsDestination(q) }, []refusal{
		{"no such queue", func(d *topics.Destination) { d.URL += "-missing" }, loopback, classify.Dead, topics.FailureRefused},
		{"guarded address", func(*topics.Destination) {}, guarded, classify.Dead, topics.FailureBlockedAddr},
		{"endpoint down", func(d *topics.Destination) { d.URL = onHost(t, d.URL, down) }, loopback, classify.Retry, topics.FailureConnection},
	})
}

// onHost is raw on host instead.
func onHost(t *testing.T, raw, host string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = host
	return u.String()
}

// TestSQSRefusals: the error codes retrying cannot change are refusals,
// the query protocol's too; the others are not.
func TestSQSRefusals(t *testing.T) {
	for _, err := range []error{&types.QueueDoesNotExist{}, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue"},
		&smithy.GenericAPIError{Code: "com.amazonaws.sqs#QueueDoesNotExist"},
		&smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessage", Err: &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}}} {
		if !errors.Is(sqsError(err), classify.ErrRefused) {
			t.Errorf("%v is not a refusal", err)
		}
	}
	for _, err := range []error{&smithy.GenericAPIError{Code: "RequestThrottled"}, &types.KmsThrottled{}, context.DeadlineExceeded} {
		if errors.Is(sqsError(err), classify.ErrRefused) {
			t.Errorf("%v is a refusal", err)
		}
	}
}

// TestSQSID: ids SQS takes as they are stay so; the others become their
// hash, equal for equal ids.
func TestSQSID(t *testing.T) {
	long := strings.Repeat("k", 129)
	for in, want := range map[string]string{"evt_1": "evt_1", "a!b~c{}": "a!b~c{}", strings.Repeat("k", 128): strings.Repeat("k", 128)} {
		if got := sqsID(in); got != want {
			t.Errorf("sqsID(%q) = %q, want it unchanged", in, got)
		}
	}
	for _, in := range []string{long, "with space", "é"} {
		if got := sqsID(in); got == in || len(got) != 64 || got != sqsID(in) {
			t.Errorf("sqsID(%q) = %q, want a stable hash", in, got)
		}
	}
}
