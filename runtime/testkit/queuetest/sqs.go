package queuetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSRegion is the region of the test endpoint's queue URLs and ARNs.
const SQSRegion = "us-east-1"

// SQS returns the shared test SQS endpoint (WEBHOOKS_TEST_SQS_ENDPOINT).
// It skips tb when the variable is unset (fails it when services are
// required).
func SQS(tb testing.TB) string {
	tb.Helper()
	return shared(tb, EnvSQSEndpoint, ElasticMQ, 19324, "a real SQS endpoint, ElasticMQ")
}

// SQSClient is an SQS client of endpoint: region SQSRegion, static
// credentials (the test endpoint takes any), the SDK's retries.
func SQSClient(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       SQSRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("hookpipe", "hookpipe-secret", ""),
	})
}

// Queue is an SQS queue of one test's own.
type Queue struct {
	Name   string
	URL    string
	FIFO   bool
	Client *sqs.Client // the helper's own; the code under test brings its own
}

// NewQueue creates a queue on the SQS endpoint: a standard one, or with
// fifo a FIFO queue (name ending .fifo, deduplication by the
// MessageDeduplicationId the sender gives, not by content). It is deleted
// when the test ends.
func NewQueue(tb testing.TB, endpoint string, fifo bool) *Queue {
	tb.Helper()
	q := &Queue{Name: uniqueName("test-"), FIFO: fifo, Client: SQSClient(endpoint)}
	attrs := map[string]string{}
	if fifo {
		q.Name += ".fifo"
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		attrs[string(types.QueueAttributeNameContentBasedDeduplication)] = "false"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := q.Client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q.Name), Attributes: attrs})
	if err != nil {
		tb.Fatalf("create queue %s: %v", q.Name, err)
	}
	q.URL = aws.ToString(out.QueueUrl)
	tb.Cleanup(func() {
		// Best effort: the test may have stopped its server.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = q.Client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q.URL)})
	})
	return q
}

// Count is the queue's ApproximateNumberOfMessages (visible messages).
func (q *Queue) Count(tb testing.TB) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := q.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		tb.Fatalf("queue %s attributes: %v", q.Name, err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil {
		tb.Fatalf("queue %s: %v", q.Name, err)
	}
	return n
}

// Read receives n messages within timeout (every system and message
// attribute with them), deletes each and returns them in the order
// received: a FIFO queue's order within each message group. It fails tb
// when fewer arrive.
func (q *Queue) Read(tb testing.TB, n int, timeout time.Duration) []types.Message {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	msgs := make([]types.Message, 0, n)
	for len(msgs) < n {
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(q.URL),
			MaxNumberOfMessages:         int32(min(n-len(msgs), 10)),
			WaitTimeSeconds:             1,
			VisibilityTimeout:           60,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			tb.Fatalf("queue %s: %d of %d messages within %v: %v", q.Name, len(msgs), n, timeout, err)
		}
		for _, m := range out.Messages {
			if _, err := q.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{
				QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle,
			}); err != nil {
				tb.Fatalf("queue %s: delete: %v", q.Name, err)
			}
		}
		msgs = append(msgs, out.Messages...)
	}
	return msgs
}

// PublishSQS sends n messages (msg(i), i from 0, its headers as string
// attributes) to the queue at queueURL, one SendMessage each, with up to inflight requests at once
// (1: each answered before the next is sent). For a FIFO queue group is
// the MessageGroupId of every message, each with a deduplication id of
// its own; order within the group is only kept with inflight 1. It returns the
// first error, after which it sends no more.
func PublishSQS(ctx context.Context, client *sqs.Client, queueURL, group string, n, inflight int, msg func(int) Msg) error {
	run := uniqueName("") + "-"
	send := func(ctx context.Context, i int) error {
		m := msg(i)
		in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(m.Body))}
		if len(m.Header) > 0 {
			in.MessageAttributes = make(map[string]types.MessageAttributeValue, len(m.Header))
			for _, h := range m.Header {
				in.MessageAttributes[h.Name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(h.Value)}
			}
		}
		if group != "" {
			in.MessageGroupId = aws.String(group)
			in.MessageDeduplicationId = aws.String(run + strconv.Itoa(i))
		}
		_, err := client.SendMessage(ctx, in)
		return err
	}
	if inflight <= 1 {
		for i := range n {
			if err := send(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range inflight {
		wg.Go(func() {
			for i := range next {
				if err := send(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
