package kafka

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// group simulates the members of a cooperative group between rebalances:
// what each owns and at which generation it last synced.
type group struct {
	t          *testing.T
	bal        kgo.GroupBalancer
	topics     map[string]int32
	owned      map[string]map[string][]int32 // member -> topic -> partitions
	generation int32
}

func newGroup(t *testing.T, bal kgo.GroupBalancer, topics map[string]int32) *group {
	return &group{t: t, bal: bal, topics: topics, owned: map[string]map[string][]int32{}}
}

// rebalance runs rounds (each member revoking what the plan no longer
// gives it and rejoining, as a cooperative member does) until a round
// changes nothing; check sees what every member owns after each round.
func (g *group) rebalance(check func(round int)) {
	g.t.Helper()
	for round := 0; round < 10; round++ {
		g.generation++
		names := make([]string, 0, len(g.owned))
		for m := range g.owned {
			names = append(names, m)
		}
		slices.Sort(names)
		var members []kmsg.JoinGroupResponseMember
		var interests []string
		for t := range g.topics {
			interests = append(interests, t)
		}
		slices.Sort(interests)
		for _, m := range names {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = m
			jm.ProtocolMetadata = g.bal.JoinGroupMetadata(interests, g.owned[m], g.generation-1)
			members = append(members, jm)
		}
		mb, _, err := g.bal.MemberBalancer(members)
		if err != nil {
			g.t.Fatal(err)
		}
		assn, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(g.topics)
		if err != nil {
			g.t.Fatal(err)
		}
		changed := false
		for _, a := range assn.IntoSyncAssignment() {
			got, err := g.bal.ParseSyncAssignment(a.MemberAssignment)
			if err != nil {
				g.t.Fatal(err)
			}
			for t := range got {
				slices.Sort(got[t])
			}
			if fmt.Sprint(got) != fmt.Sprint(g.owned[a.MemberID]) {
				changed = true
			}
			g.owned[a.MemberID] = got
		}
		check(round)
		if !changed {
			return
		}
	}
	g.t.Fatal("the group did not settle in 10 rounds")
}

// slots maps each partition number to the members owning a partition of it.
func (g *group) slots() map[int32][]string {
	out := map[int32][]string{}
	for m, ts := range g.owned {
		for _, ps := range ts {
			for _, p := range ps {
				if !slices.Contains(out[p], m) {
					out[p] = append(out[p], m)
				}
			}
		}
	}
	return out
}

var copartitionTopics = map[string]int32{"deliveries": 12, "deliveries.high": 12, "deliveries.low": 12, "redeliveries": 12}

// churn: three members join one after another, one leaves, two more join,
// one leaves; after every round of every rebalance each partition number
// is owned by at most one member, and once settled every partition is
// owned, by members holding within one slot of each other.
func churn(g *group, check func(round int)) {
	steps := []struct{ join, leave string }{{join: "a"}, {join: "b"}, {join: "c"}, {leave: "b"}, {join: "d"}, {join: "e"}, {leave: "a"}}
	for _, s := range steps {
		if s.join != "" {
			g.owned[s.join] = nil
		} else {
			delete(g.owned, s.leave)
		}
		g.rebalance(check)
	}
}

func TestCopartitionedBalancer(t *testing.T) {
	g := newGroup(t, CopartitionedBalancer(), copartitionTopics)
	settled := func() {
		counts := map[string]int{}
		for s, ms := range g.slots() {
			counts[ms[0]]++
			for topic, n := range copartitionTopics {
				if s < n && !slices.Contains(g.owned[ms[0]][topic], s) {
					t.Errorf("partition %d of %s owned by nobody (slot of %s)", s, topic, ms[0])
				}
			}
		}
		if len(g.slots()) != 12 {
			t.Errorf("%d slots owned, want 12", len(g.slots()))
		}
		lo, hi := 12, 0
		for m := range g.owned {
			lo, hi = min(lo, counts[m]), max(hi, counts[m])
		}
		if hi-lo > 1 {
			t.Errorf("unbalanced: %v", counts)
		}
	}
	churn(g, func(round int) {
		for s, ms := range g.slots() {
			if len(ms) > 1 {
				t.Fatalf("round %d: partition number %d owned by %v at once", round, s, ms)
			}
		}
	})
	settled()

	// Sticky: a member joining three takes a quarter, and nothing else moves.
	before := g.slots()
	g.owned["f"] = nil
	g.rebalance(func(int) {})
	moved := 0
	for s, ms := range g.slots() {
		if before[s][0] != ms[0] {
			moved++
			if ms[0] != "f" {
				t.Errorf("slot %d moved from %s to %s, not to the new member", s, before[s][0], ms[0])
			}
		}
	}
	if moved != 3 {
		t.Errorf("%d slots moved to the fourth member, want 3", moved)
	}
	settled()
}

// TestCopartitionedBalancerTakesOverSplitSlots: a group coming from
// another balancer (partitions of one number owned by several members)
// ends with each slot on one member, never adding to a split.
func TestCopartitionedBalancerTakesOverSplitSlots(t *testing.T) {
	g := newGroup(t, CopartitionedBalancer(), map[string]int32{"deliveries": 2, "redeliveries": 2})
	g.owned["a"] = map[string][]int32{"deliveries": {0}, "redeliveries": {1}}
	g.owned["b"] = map[string][]int32{"deliveries": {1}, "redeliveries": {0}}
	g.rebalance(func(round int) {
		if round == 0 {
			return // the split it starts from
		}
		for s, ms := range g.slots() {
			if len(ms) > 1 {
				t.Fatalf("round %d: partition number %d owned by %v at once", round, s, ms)
			}
		}
	})
	if len(g.slots()) != 2 {
		t.Fatalf("slots %v, want both owned", g.slots())
	}
}

// TestStickySplitsSlots shows what the co-partitioned balancer is for:
// franz-go's cooperative-sticky balancer, the default, gives partitions of
// one number to different members in the same churn.
func TestStickySplitsSlots(t *testing.T) {
	g := newGroup(t, kgo.CooperativeStickyBalancer(), copartitionTopics)
	split := false
	churn(g, func(int) {
		for _, ms := range g.slots() {
			split = split || len(ms) > 1
		}
	})
	if !split {
		t.Fatal("cooperative-sticky kept every partition number on one member: the scenario shows nothing")
	}
}
