package deliverer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/hookpipe/hookpipe/topics"
)

// noticeID derives an operational event's id from what it reports, so a
// record produced again after a crash is the same event.
func noticeID(typ string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "ntf_" + typ[len(topics.NoticePrefix):] + "_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// noticeRecord is the events record of an operational event about sub,
// nil when no subscription would take it and no alert channel hears of it:
// events nobody asked for are not published.
func (d *deliverer) noticeRecord(id, typ string, sub *topics.Subscription, n topics.Notice) *kgo.Record {
	ev := topics.NoticeEvent(id, typ, sub, n)
	if d.table != nil && len(d.table.Match(&ev)) == 0 && len(d.alerts.Hearing(ev.Tenant, typ)) == 0 {
		return nil
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // an Event has no type that fails
	}
	return &kgo.Record{Topic: d.names.Events(), Key: []byte(ev.Key), Value: b}
}

// notices are the operational events the outcome records recs announce:
// a delivery dead-lettered (unless it was itself an operational event's:
// two failing endpoints would tell each other forever), a subscription
// disabled. They are produced with recs, so acknowledged before the
// delivery's offset is committed; a copy produced again after a crash has
// the same id.
func (d *deliverer) notices(recs []*kgo.Record) []*kgo.Record {
	if !d.cfg.Notices {
		return nil
	}
	var out []*kgo.Record
	for _, r := range recs {
		switch r.Topic {
		case d.names.DLQ():
			dl, err := topics.DecodeDeadLetter(r.Value)
			if err != nil || dl.Delivery == nil || dl.Redriven != nil || topics.IsNotice(dl.Delivery.EventType) {
				continue
			}
			del := dl.Delivery
			sub, ok := d.table.Get(del.SubscriptionID)
			if !ok {
				continue // deleted: nobody to tell in its tenant
			}
			if n := d.noticeRecord(noticeID(topics.NoticeMessageDead, del.SubscriptionID, del.EventID, fmt.Sprint(r.Partition), fmt.Sprint(dl.Attempts)),
				topics.NoticeMessageDead, sub, topics.Notice{Reason: dl.Reason, FailureCategory: dl.FailureCategory, EventID: del.EventID,
					EventType: del.EventType, Attempts: dl.Attempts, At: dl.DeadAt}); n != nil {
				out = append(out, n)
			}
		case d.names.Subscriptions():
			if r.Value == nil {
				continue
			}
			sub, err := topics.DecodeSubscriptionWith(r.Value, d.cfg.Secrets)
			if err != nil || sub.Enabled {
				continue
			}
			if n := d.noticeRecord(noticeID(topics.NoticeDisabled, sub.ID, sub.UpdatedAt.Format(time.RFC3339Nano)),
				topics.NoticeDisabled, &sub, topics.Notice{Reason: sub.DisabledReason, At: sub.UpdatedAt}); n != nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// withNotices is recs and their notices, in a slice of its own.
func (d *deliverer) withNotices(recs []*kgo.Record) []*kgo.Record {
	if n := d.notices(recs); len(n) > 0 {
		return append(recs[:len(recs):len(recs)], n...)
	}
	return recs
}

// breakerNotice publishes the news of a breaker's transition, which one
// replica saw (the breaker's state changes in Redis, atomically). It is not
// part of a delivery's outcome: a failure to produce it is logged.
func (d *deliverer) breakerNotice(ctx context.Context, sub *topics.Subscription, typ, reason string, at time.Time) {
	if !d.cfg.Notices {
		return
	}
	r := d.noticeRecord(noticeID(typ, sub.ID, at.Format(time.RFC3339Nano)), typ, sub, topics.Notice{Reason: reason, At: at})
	if r == nil {
		return
	}
	d.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err != nil {
			d.log.Warn("operational event not published", zap.String("type", typ), zap.String("subscription", sub.ID), zap.Error(err))
		}
	})
}
