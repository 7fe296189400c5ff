package send

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// sqsIdleConnsPerHost is how many idle connections to an SQS endpoint are
// kept: many destinations share AWS's endpoint of a region, and as many
// attempts may be in flight to it as a deliverer runs at once.
const sqsIdleConnsPerHost = 64

// sqsPublisher sends to the customers' own SQS queues (or an SQS-compatible
// server's), a client per destination (see conns), all on one pool of
// connections dialled through the SSRF guard.
type sqsPublisher struct {
	transport *http.Transport
	client    *http.Client
	conns     *conns[*sqs.Client]
}

func newSQSPublisher(dial dialFunc) Publisher {
	tr := &http.Transport{
		Proxy:               nil, // the egress proxy, if any, is in dial
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: sqsIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &sqsPublisher{
		transport: tr,
		client:    &http.Client{Transport: tr},
		// A client holds no connection of its own: the transport's are
		// closed with the publisher.
		conns: newConns(func(*sqs.Client) {}, nil),
	}
}

// Publish sends m to d's queue, its headers as string attributes. A FIFO
// queue orders a key's messages (the message group) and drops a second
// copy of a delivery within its five-minute deduplication interval.
func (p *sqsPublisher) Publish(ctx context.Context, d *topics.Destination, m *Message) error {
	api, err := p.conns.get(d, func() (*sqs.Client, error) { return p.api(d) })
	if err != nil {
		return err
	}
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(d.URL),
		MessageBody:       aws.String(string(m.Body)),
		MessageAttributes: sqsAttributes(m.Header),
	}
	if d.IsFIFO() {
		in.MessageGroupId = aws.String(sqsID(m.Key))
		in.MessageDeduplicationId = aws.String(sqsID(m.ID))
	}
	_, err = api.SendMessage(ctx, in)
	return sqsError(err)
}

func (p *sqsPublisher) Close() {
	p.conns.close()
	p.transport.CloseIdleConnections()
}

// api is a client of d's queue: the endpoint is the queue URL's scheme
// and host, so that an SQS-compatible server works as AWS does. The SDK
// does not retry: an attempt that fails is retried on the subscription's
// schedule, as any other.
func (p *sqsPublisher) api(d *topics.Destination) (*sqs.Client, error) {
	u, err := url.Parse(d.URL) // validated with the subscription
	if err != nil {
		return nil, fmt.Errorf("%w: %v", classify.ErrRefused, err)
	}
	return sqs.New(sqs.Options{
		Region:       d.Region,
		BaseEndpoint: aws.String(u.Scheme + "://" + u.Host),
		Credentials:  credentials.NewStaticCredentialsProvider(d.AccessKeyID, d.SecretAccessKey, ""),
		HTTPClient:   p.client,
		Retryer:      aws.NopRetryer{},
	}), nil
}

// sqsMaxAttributes is how many attributes an SQS message carries.
const sqsMaxAttributes = 10

// sqsAttributes are a message's headers as string attributes. The
// subscription's headers and the four that sign a message fit (topics
// checks); past the limit, the trace context, which comes between them,
// is left out. SQS has no empty attribute: a header without a value is
// left out too.
func sqsAttributes(h []Field) map[string]types.MessageAttributeValue {
	if over := len(h) - sqsMaxAttributes; over > 0 {
		h = slices.Concat(h[:len(h)-4-over], h[len(h)-4:])
	}
	attrs := make(map[string]types.MessageAttributeValue, len(h))
	for _, f := range h {
		if f.Value != "" {
			attrs[f.Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(f.Value)}
		}
	}
	return attrs
}

// sqsID is s as a FIFO queue's message group or deduplication id: up to
// 128 printable ASCII characters but space; any other s is replaced by its
// SHA-256, so that equal keys stay equal.
func sqsID(s string) string {
	valid := len(s) > 0 && len(s) <= 128
	for i := 0; valid && i < len(s); i++ {
		valid = s[i] > ' ' && s[i] < 0x7f
	}
	if valid {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// sqsRefusals are the error codes retrying cannot change: no such queue,
// credentials or permissions refused, a message the queue does not take.
// SQS answers in JSON with the older query protocol's codes alongside,
// which the SDK reports: both are listed.
var sqsRefusals = map[string]bool{
	"QueueDoesNotExist": true, "AWS.SimpleQueueService.NonExistentQueue": true,
	"AccessDenied": true, "AccessDeniedException": true,
	"InvalidClientTokenId": true, "SignatureDoesNotMatch": true, "UnrecognizedClientException": true,
	"InvalidParameterValue": true, "InvalidParameterValueException": true,
	"InvalidMessageContents": true, "KmsAccessDenied": true, "KmsNotFound": true,
}

// sqsError marks a refusal as classify.ErrRefused.
func sqsError(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && sqsRefusals[sqsCode(apiErr.ErrorCode())] {
		return fmt.Errorf("%w: %w", classify.ErrRefused, err)
	}
	return err
}

// sqsCode is an error code without the namespace and the URI a JSON
// protocol's error type may carry (com.amazonaws.sqs#QueueDoesNotExist),
// which the SDK passes on when it does not know the code.
func sqsCode(code string) string {
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	code, _, _ = strings.Cut(code, ":")
	return code
}
