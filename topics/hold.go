package topics

import (
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Hold is the value on the holds topic, keyed by the delivery key of an
// ordered subscription ("<subscription id>/<ordering key>"): the key is
// held while its head delivery waits in a retry tier. Deliveries of the key
// arriving meanwhile are parked (Names.Parked) and delivered in order once
// the head succeeds or is dead-lettered. A null value releases the key.
type Hold struct {
	// Head is the event id of the delivery whose outcome releases the key,
	// and HeadAttempt the attempt number its retry record carries.
	Head        string `json:"head"`
	HeadAttempt int    `json:"head_attempt"`
	// ParkedFrom is the offset, in the key's partition of the parked topic,
	// from which its parked deliveries are read; -1 when none is parked.
	ParkedFrom int64 `json:"parked_from"`
	// Through is the highest offset, in the key's partition of the
	// deliveries topic, of a record this hold already accounts for (the
	// head's own record, parked ones): a record at or below it that is
	// redone after a crash was handled before and is skipped.
	Through int64 `json:"through"`
	// ParkedPartition is the key's partition of the parked topic.
	ParkedPartition int32     `json:"parked_partition"`
	Since           time.Time `json:"since"`
	// ParkedLast is the offset of the key's last parked delivery, where a
	// release starts: each parked delivery names the key's previous one
	// (HeaderParkedAfter), so a release reads the key's own records only,
	// walking back to ParkedFrom. It travels in the hold record's header
	// HeaderParkedLast, not in the value, so deliverers of every version
	// read the hold. -1 when unknown (a hold or parked delivery written
	// before the chain): the release then reads the partition from
	// ParkedFrom on. Meaningful only while ParkedFrom >= 0; below
	// ParkedFrom, nothing is parked after ParkedFrom.
	ParkedLast int64 `json:"-"`
	// ReleasingTo is, while the key is being released, the parked offset
	// of the last delivery a release copies to the redeliveries topic
	// (each copy names its parked offset in HeaderParkedAt; a head's
	// release writes the hold before its copies, so that a crash repeats
	// the copies and not the head's request): Head finished, and the
	// copies from ParkedFrom to ReleasingTo are
	// attempted in order as they come back, each moving ParkedFrom past
	// it. -1 when no release is under way. It travels in the hold
	// record's header HeaderReleasingTo, like ParkedLast.
	ReleasingTo int64 `json:"-"`
}

// Headers of the parked chain (see Hold.ParkedLast): on a parked delivery,
// the offset of the same key's previous parked delivery (-1: none before
// it); on a hold record, Hold.ParkedLast and Hold.ReleasingTo; on a
// parked delivery copied to the redeliveries topic by a release, its
// offset on the parked topic.
const (
	HeaderParkedAfter = "webhooks-parked-after"
	HeaderParkedLast  = "webhooks-parked-last"
	HeaderReleasingTo = "webhooks-releasing-to"
	HeaderParkedAt    = "webhooks-parked-at"
	// HeaderHoldEpoch is, on a hold record (tombstones too) and on a
	// fence, its writer's epoch for the key's partition number: one more
	// than the highest epoch in the holds partition when the writer was
	// assigned it. Readers ignore a hold record whose epoch is below the
	// highest one seen in its partition: it was written by a deliverer
	// that had lost the partition to another (ADR 0027).
	HeaderHoldEpoch = "webhooks-hold-epoch"
)

// FencePrefix starts the keys of fence records on the holds topic: a
// deliverer newly assigned a partition writes one there with its epoch
// before reading the partition's holds, so that every hold written after
// by the partition's previous owner is ignored. A fence is no hold.
const FencePrefix = "\x00fence-"

// FenceKey is the key of the fence record of partition p of a holds topic
// with n partitions: a key the partitioner places on p, the same one for
// every fence of p, so compaction keeps the newest.
func FenceKey(p int32, n int) []byte {
	for i := 0; ; i++ {
		k := []byte(FencePrefix + strconv.Itoa(i))
		if hashPartition(k, n) == int(p) {
			return k
		}
	}
}

// IsFence tells whether a holds record key is a fence's.
func IsFence(key []byte) bool { return strings.HasPrefix(string(key), FencePrefix) }

// EpochHeader is the HeaderHoldEpoch header of epoch e.
func EpochHeader(e int32) kgo.RecordHeader {
	return kgo.RecordHeader{Key: HeaderHoldEpoch, Value: []byte(strconv.FormatInt(int64(e), 10))}
}

// EpochOf returns the HeaderHoldEpoch of a holds record; false when it
// has none (written before ADR 0027) or a malformed one.
func EpochOf(headers []kgo.RecordHeader) (int32, bool) {
	for _, h := range headers {
		if h.Key == HeaderHoldEpoch {
			n, err := strconv.ParseInt(string(h.Value), 10, 32)
			return int32(n), err == nil && n >= 0
		}
	}
	return 0, false
}

// OffsetHeader is a header holding an offset in decimal.
func OffsetHeader(key string, offset int64) kgo.RecordHeader {
	return kgo.RecordHeader{Key: key, Value: []byte(strconv.FormatInt(offset, 10))}
}

// OffsetOf returns the offset in header key of headers; false when absent
// or malformed.
func OffsetOf(headers []kgo.RecordHeader, key string) (int64, bool) {
	for _, h := range headers {
		if h.Key == key {
			n, err := strconv.ParseInt(string(h.Value), 10, 64)
			return n, err == nil && n >= -1
		}
	}
	return 0, false
}

// Encode renders the record value.
func (h *Hold) Encode() []byte {
	return encodeRecord(h)
}

// Headers are the record headers of the hold: ParkedLast when known,
// ReleasingTo during a release.
func (h *Hold) Headers() []kgo.RecordHeader {
	if h.ParkedFrom < 0 {
		return nil
	}
	var hs []kgo.RecordHeader
	if h.ParkedLast >= 0 {
		hs = append(hs, OffsetHeader(HeaderParkedLast, h.ParkedLast))
	}
	if h.ReleasingTo >= 0 {
		hs = append(hs, OffsetHeader(HeaderReleasingTo, h.ReleasingTo))
	}
	return hs
}

// DecodeHold decodes a holds record: its value and headers.
func DecodeHold(b []byte, headers []kgo.RecordHeader) (Hold, error) {
	h := Hold{ParkedLast: -1, ReleasingTo: -1}
	if err := decodeStrict("hold", b, &h); err != nil {
		return Hold{}, err
	}
	if last, ok := OffsetOf(headers, HeaderParkedLast); ok {
		h.ParkedLast = last
	}
	if to, ok := OffsetOf(headers, HeaderReleasingTo); ok {
		h.ReleasingTo = to
	}
	if h.Head == "" || h.HeadAttempt < 1 {
		return Hold{}, invalid("hold", "head", "head and head_attempt are required")
	}
	return h, nil
}
