package alert

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// MaxListed is how many notices a digest lists one by one; the others are
// only counted, so a storm of thousands makes a message of bounded size.
const MaxListed = 20

// Notice is an operational event as a digest lists it.
type Notice struct {
	ID     string        `json:"id"`
	Type   string        `json:"type"`
	Tenant string        `json:"tenant,omitempty"`
	Data   topics.Notice `json:"data"`
}

// NoticeOf reads an operational event (the value of a notices record).
func NoticeOf(ev *topics.Event) (Notice, error) {
	n := Notice{ID: ev.ID, Type: ev.Type, Tenant: ev.Tenant}
	if err := json.Unmarshal(ev.Data, &n.Data); err != nil {
		return Notice{}, fmt.Errorf("operational event %s: data: %w", ev.ID, err)
	}
	return n, nil
}

// Digest is what one channel is told of one window: every notice counted
// by type, the first MaxListed listed.
type Digest struct {
	Channel string `json:"channel"`
	// Tenant is the channel's; empty for the operators', which hears of
	// every tenant.
	Tenant string `json:"tenant,omitempty"`
	// Test marks the message webhookctl alert-channels test (and the API's
	// test route) sends.
	Test bool `json:"test,omitempty"`
	// From and To are the times of the earliest and the latest notice.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Total counts every notice; Counts by type.
	Total   int            `json:"total"`
	Counts  map[string]int `json:"counts"`
	Notices []Notice       `json:"notices"`
	// Omitted counts the notices counted but not listed.
	Omitted int `json:"omitted"`
}

// NewDigest is an empty digest of channel c.
func NewDigest(c *topics.AlertChannel) *Digest {
	return &Digest{Channel: c.ID, Tenant: c.Tenant, Counts: map[string]int{}, Notices: []Notice{}}
}

// TestDigest is the message that shows a channel works.
func TestDigest(c *topics.AlertChannel, now time.Time) *Digest {
	d := NewDigest(c)
	d.Test, d.From, d.To = true, now.UTC(), now.UTC()
	return d
}

// Add counts a notice that came at, listing it while fewer than MaxListed
// are.
func (d *Digest) Add(n Notice, at time.Time) {
	if at = at.UTC(); d.Total == 0 || at.Before(d.From) {
		d.From = at
	}
	if at.After(d.To) {
		d.To = at
	}
	d.Total++
	d.Counts[n.Type]++
	if len(d.Notices) < MaxListed {
		d.Notices = append(d.Notices, n)
	} else {
		d.Omitted++
	}
}

// whose names the tenant the digest is about.
func (d *Digest) whose() string {
	if d.Tenant == "" {
		return "every tenant"
	}
	return "tenant " + d.Tenant
}

// types are the types counted, in the order of topics.NoticeTypes.
func (d *Digest) types() []string {
	var out []string
	for _, t := range topics.NoticeTypes {
		if d.Counts[t] > 0 {
			out = append(out, t)
		}
	}
	for t := range d.Counts { // a type newer than this build
		if !slices.Contains(topics.NoticeTypes, t) {
			out = append(out, t)
		}
	}
	return out
}

// Subject is the mail's subject: what happened, in counts.
func (d *Digest) Subject() string {
	if d.Test {
		return "[hookpipe] test of alert channel " + d.Channel
	}
	parts := make([]string, 0, len(d.Counts))
	for _, t := range d.types() {
		parts = append(parts, fmt.Sprintf("%d %s", d.Counts[t], strings.TrimPrefix(t, topics.NoticePrefix)))
	}
	return fmt.Sprintf("[hookpipe] %s: %s", d.whose(), strings.Join(parts, ", "))
}

// Text is the message in plain text: the counts by type, then the notices
// listed, one a line.
func (d *Digest) Text() string {
	var b strings.Builder
	if d.Test {
		fmt.Fprintf(&b, "This is a test of hookpipe alert channel %s (%s): it works.\n", d.Channel, d.whose())
		return b.String()
	}
	fmt.Fprintf(&b, "hookpipe operational events for %s, %s to %s:\n\n", d.whose(),
		d.From.Format(time.RFC3339), d.To.Format(time.RFC3339))
	for _, t := range d.types() {
		fmt.Fprintf(&b, "  %-28s %d\n", t, d.Counts[t])
	}
	b.WriteString("\n")
	for _, n := range d.Notices {
		fmt.Fprintf(&b, "- %s %s", n.Data.At.UTC().Format(time.RFC3339), n.Type)
		if d.Tenant == "" {
			fmt.Fprintf(&b, " tenant %s", n.Tenant)
		}
		fmt.Fprintf(&b, " subscription %s (%s)", n.Data.SubscriptionID, n.Data.URL)
		if n.Data.EventID != "" {
			fmt.Fprintf(&b, " event %s (%s)", n.Data.EventID, n.Data.EventType)
		}
		if n.Data.Reason != "" {
			fmt.Fprintf(&b, ": %s", n.Data.Reason)
		}
		b.WriteString("\n")
	}
	if d.Omitted > 0 {
		fmt.Fprintf(&b, "... and %d more, counted above.\n", d.Omitted)
	}
	return b.String()
}

// SlackBody is the body POSTed to a Slack-compatible incoming webhook.
func (d *Digest) SlackBody() []byte {
	b, err := json.Marshal(map[string]string{"text": d.Subject() + "\n" + d.Text()})
	if err != nil {
		panic(err) // strings always encode
	}
	return b
}

// JSON is the body POSTed to a webhook channel: the digest itself.
func (d *Digest) JSON() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // a Digest has no type that fails
	}
	return b
}
