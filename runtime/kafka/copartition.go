package kafka

import (
	"cmp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CopartitionedProtocol is the name of the co-partitioned balancer in a
// group's JoinGroup.
const CopartitionedProtocol = "hookpipe-copartitioned"

// CopartitionedBalancer assigns partition i of every topic the group
// consumes to one member: a slot, in Kafka Streams' words. A key lands on
// the same partition number in each of them (one partitioner, one count),
// so all the records of a key come to one process, which runs them one
// after another. The deliverer relies on it: an ordered key's hold is read
// and rewritten by whoever handles its next record, from `deliveries` or
// from `redeliveries`, and two processes doing that at once overwrite
// each other's holds.
//
// It is sticky (a slot stays with the member that owns it while the
// members' counts stay within one of each other) and cooperative: a slot
// that moves is first revoked from its owner, all its topics together, and
// assigned in the next round (kgo.BalancePlan.AdjustCooperative), so no
// two members ever own partitions of one slot at once. Topics with fewer
// partitions than others simply have no partition in the higher slots.
// Every member is expected to consume the same topics: a topic that a
// slot's owner does not consume stays unassigned in that slot (rather than
// go to another member and split the slot).
func CopartitionedBalancer() kgo.GroupBalancer { return copartitioned{} }

type copartitioned struct{}

func (copartitioned) ProtocolName() string { return CopartitionedProtocol }

func (copartitioned) IsCooperative() bool { return true }

func (copartitioned) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for topic, parts := range current {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = topic, parts
		meta.OwnedPartitions = append(meta.OwnedPartitions, o)
	}
	slices.SortFunc(meta.OwnedPartitions, func(a, b kmsg.ConsumerMemberMetadataOwnedPartition) int {
		return cmp.Compare(a.Topic, b.Topic)
	})
	return meta.AppendTo(nil)
}

func (copartitioned) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (c copartitioned) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(c, members)
	return b, b.MemberTopics(), err
}

// Balance keeps every member's slots up to its share, gives the slots left
// over to the members below theirs (fewest first), and then drops from
// the plan whatever moves from one member to another this round.
func (copartitioned) Balance(b *kgo.ConsumerBalancer, partitions map[string]int32) kgo.IntoSyncAssignment {
	type member struct {
		m      *kmsg.JoinGroupResponseMember
		topics map[string]bool
		slots  []int32
	}
	var members []*member
	byID := map[string]*member{}
	// claims: slot -> member -> (generation, partitions of the slot owned)
	type claim struct{ gen, n int32 }
	claims := map[int32]map[string]claim{}
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := &member{m: m, topics: map[string]bool{}}
		for _, t := range meta.Topics {
			mb.topics[t] = true
		}
		members = append(members, mb)
		byID[m.MemberID] = mb
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				if claims[p] == nil {
					claims[p] = map[string]claim{}
				}
				c := claims[p][m.MemberID]
				c.gen, c.n = meta.Generation, c.n+1
				claims[p][m.MemberID] = c
			}
		}
	})
	plan := b.NewPlan()
	if len(members) == 0 {
		return plan
	}
	sort.Slice(members, func(i, j int) bool { return members[i].m.MemberID < members[j].m.MemberID })

	var slots int32
	for _, n := range partitions {
		slots = max(slots, n)
	}
	// Each slot's owner now: the member claiming it at the highest
	// generation (a member that missed rebalances may still claim what
	// another took since), then with most of its partitions.
	var free []int32
	for s := range slots {
		owner := ""
		var best claim
		for id, c := range claims[s] {
			if owner == "" || c.gen > best.gen || c.gen == best.gen && (c.n > best.n || c.n == best.n && id < owner) {
				owner, best = id, c
			}
		}
		if owner == "" {
			free = append(free, s)
			continue
		}
		byID[owner].slots = append(byID[owner].slots, s)
	}
	// Shares: slots/members each, one more for the first slots%members of
	// them, taken by those owning most now (fewest moves).
	quota := map[*member]int{}
	order := slices.Clone(members)
	slices.SortStableFunc(order, func(a, b *member) int { return cmp.Compare(len(b.slots), len(a.slots)) })
	base, extra := int(slots)/len(members), int(slots)%len(members)
	for i, mb := range order {
		quota[mb] = base
		if i < extra {
			quota[mb]++
		}
	}
	for _, mb := range members {
		if len(mb.slots) > quota[mb] {
			slices.Sort(mb.slots)
			free = append(free, mb.slots[quota[mb]:]...)
			mb.slots = mb.slots[:quota[mb]]
		}
	}
	slices.Sort(free)
	for _, s := range free {
		var to *member
		for _, mb := range members {
			if len(mb.slots) < quota[mb] && (to == nil || len(mb.slots) < len(to.slots)) {
				to = mb
			}
		}
		to.slots = append(to.slots, s)
	}
	for _, mb := range members {
		slices.Sort(mb.slots)
		for t, n := range partitions {
			if !mb.topics[t] {
				continue
			}
			for _, s := range mb.slots {
				if s < n {
					plan.AddPartition(mb.m, t, s)
				}
			}
		}
	}
	plan.AdjustCooperative(b)
	return plan
}
