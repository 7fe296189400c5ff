package service

import "time"

// AlertChannelBody is what is written of an alert channel.
type AlertChannelBody struct {
	Tenant   *string  `json:"tenant,omitempty" doc:"Whose operational events the channel hears of; a tenant key's own tenant when absent. An admin leaves it out for the operators' channel, which hears of every tenant."`
	Kind     string   `json:"kind" enum:"email,slack,webhook" doc:"email (through the API's SMTP server, WEBHOOKS_SMTP_*), slack (a Slack-compatible incoming webhook: POST {\"text\": ...}) or webhook (POST of the digest as JSON)."`
	To       []string `json:"to,omitempty" maxItems:"20" doc:"The recipients of an email channel: bare addresses."`
	URL      string   `json:"url,omitempty" doc:"Where a slack or webhook channel POSTs; shown masked once written (it usually holds a credential)."`
	Types    []string `json:"types,omitempty" doc:"The operational event types heard of: webhook.endpoint.failing, webhook.endpoint.recovered, webhook.endpoint.disabled, webhook.message.dead; absent: all."`
	DigestMS int64    `json:"digest_ms,omitempty" doc:"The digest window in milliseconds (1000 to 86400000): the notices of a window are sent as one message at its end. Absent: 300000 (5 minutes)."`
}

// AlertChannelFields are the settings a change of an alert channel
// gives: each one given replaces the channel's, the others stay. A URL,
// shown masked, need not be given again.
type AlertChannelFields struct {
	Kind     *string   `json:"kind,omitempty" enum:"email,slack,webhook" doc:"A new kind drops the settings of the old one it has no use for: the URL of a slack or webhook channel made email, the recipients of an email channel made slack or webhook."`
	To       *[]string `json:"to,omitempty" maxItems:"20" doc:"The recipients of an email channel (replaces them all)."`
	URL      *string   `json:"url,omitempty" doc:"Where a slack or webhook channel POSTs; absent: the one it has."`
	Types    *[]string `json:"types,omitempty" doc:"The operational event types heard of (replaces them); empty: all."`
	DigestMS *int64    `json:"digest_ms,omitempty" doc:"The digest window in milliseconds (1000 to 86400000)."`
}

// AlertChannel is an alert channel as the API shows it.
type AlertChannel struct {
	ID       string   `json:"id"`
	Tenant   string   `json:"tenant" doc:"Empty for the operators' channel."`
	Kind     string   `json:"kind"`
	To       []string `json:"to,omitempty"`
	URL      string   `json:"url,omitempty" doc:"Masked: the scheme and host."`
	Types    []string `json:"types" doc:"Empty: every operational event type."`
	DigestMS int64    `json:"digest_ms"`
	// CreatedAt and UpdatedAt are the record's.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// AlertChannelsOutput is the answer of GET /v1/alert-channels.
type AlertChannelsOutput struct {
	Body struct {
		Data []AlertChannel `json:"data" doc:"The channels the key sees, by id."`
	}
}

// AlertTestOutput is the answer of POST /v1/alert-channels/{id}/test.
type AlertTestOutput struct {
	Body struct {
		Sent  bool   `json:"sent"`
		Error string `json:"error,omitempty" doc:"Why it was not sent."`
	}
}
