// Package decode reads attempt records fast. Attempt decodes the JSON that
// topics.Attempt.Encode writes without reflection; for anything it is not
// sure to read exactly as topics.DecodeAttempt would (escapes, unknown or
// repeated keys, nulls, odd numbers), it defers to topics.DecodeAttempt, so
// the result is always the contract's. JSON decoding is most of the
// recorder's own CPU: this makes it several times cheaper.
package decode

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hookpipe/hookpipe/topics"
)

// Attempt decodes an attempt record value with the contract's semantics.
func Attempt(b []byte) (topics.Attempt, error) {
	if a, ok := fast(b); ok {
		return a, nil
	}
	return topics.DecodeAttempt(b)
}

// field bits, to refuse repeated keys.
const (
	fAttemptID = 1 << iota
	fEventID
	fEventType
	fSubscriptionID
	fTenant
	fAttempt
	fOutcome
	fFailureCategory
	fHTTPStatus
	fDurationMS
	fTS
	fError
	fNextAttemptAt
	fPublishedAt
)

type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes, as valid UTF-8 without control
// characters; false for anything else.
func (p *parser) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start, ascii := p.i, true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false // encoding/json would replace the bad bytes
			}
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

// quoted reads a string and returns it with its quotes, for
// time.Time.UnmarshalJSON.
func (p *parser) quoted() ([]byte, bool) {
	p.space()
	start := p.i
	if _, ok := p.str(); !ok {
		return nil, false
	}
	return p.b[start:p.i], true
}

// number reads a JSON number literal; integer says it must have no
// fraction or exponent.
func (p *parser) number(integer bool) ([]byte, bool) {
	p.space()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	n := digits()
	if n == 0 || n > 1 && p.b[intStart] == '0' {
		return nil, false
	}
	if !integer {
		if p.i < len(p.b) && p.b[p.i] == '.' {
			p.i++
			if digits() == 0 {
				return nil, false
			}
		}
		if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
			p.i++
			if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
				p.i++
			}
			if digits() == 0 {
				return nil, false
			}
		}
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case ',', '}', ' ', '\t', '\n', '\r':
		default:
			return nil, false
		}
	}
	return p.b[start:p.i], true
}

func (p *parser) integer() (int, bool) {
	lit, ok := p.number(true)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 0)
	return int(n), err == nil
}

func (p *parser) time(t *time.Time) bool {
	q, ok := p.quoted()
	return ok && t.UnmarshalJSON(q) == nil
}

func fast(b []byte) (a topics.Attempt, ok bool) {
	p := parser{b: b}
	if !p.byte('{') {
		return a, false
	}
	seen := 0
	if p.byte('}') {
		return a, false // no required field
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return a, false
		}
		var bit int
		var s *string
		switch string(key) {
		case "attempt_id":
			bit, s = fAttemptID, &a.AttemptID
		case "event_id":
			bit, s = fEventID, &a.EventID
		case "event_type":
			bit, s = fEventType, &a.EventType
		case "subscription_id":
			bit, s = fSubscriptionID, &a.SubscriptionID
		case "tenant":
			bit, s = fTenant, &a.Tenant
		case "outcome":
			bit, s = fOutcome, &a.Outcome
		case "failure_category":
			bit, s = fFailureCategory, &a.FailureCategory
		case "error":
			bit, s = fError, &a.Error
		case "attempt":
			bit = fAttempt
			if a.Attempt, ok = p.integer(); !ok {
				return a, false
			}
		case "http_status":
			bit = fHTTPStatus
			if a.HTTPStatus, ok = p.integer(); !ok {
				return a, false
			}
		case "duration_ms":
			bit = fDurationMS
			lit, ok := p.number(false)
			if !ok {
				return a, false
			}
			var err error
			if a.DurationMS, err = strconv.ParseFloat(string(lit), 64); err != nil {
				return a, false
			}
		case "ts":
			bit = fTS
			if !p.time(&a.TS) {
				return a, false
			}
		case "next_attempt_at":
			bit = fNextAttemptAt
			if !p.time(&a.NextAttemptAt) {
				return a, false
			}
		case "published_at":
			bit = fPublishedAt
			if !p.time(&a.PublishedAt) {
				return a, false
			}
		default:
			return a, false // unknown: the contract refuses it
		}
		if s != nil {
			v, ok := p.str()
			if !ok {
				return a, false
			}
			*s = string(v)
		}
		if seen&bit != 0 {
			return a, false
		}
		seen |= bit
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return a, false
		}
		break
	}
	p.space()
	if p.i != len(p.b) || a.AttemptID == "" || a.SubscriptionID == "" || a.Outcome == "" {
		return a, false
	}
	return a, true
}
