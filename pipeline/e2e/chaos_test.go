package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/pipeline/internal/stack"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// TestChaosKills (invariants 1 to 4), after issue 30's scenario: two
// dispatchers, three deliverers and two retriers as processes, an ordered
// and an unordered subscription whose endpoint fails one request in ten
// with short retry schedules; events published in five rounds, and after
// each of the first four, replicas killed with SIGKILL and replaced: a
// deliverer, then a dispatcher, then a retrier, then a deliverer and a
// dispatcher together. Every event arrives at both subscriptions (no key
// stuck), the ordered one's first arrivals in publish order per key,
// fan-out exactly once, and each subscription gets at most the in-flight
// cap of duplicates per deliverer killed (ADR 0029): dispatcher kills
// repeat nothing, retrier kills only a release whose commit was not
// acknowledged yet.
//
// On Apache Kafka only: after such kills kfake holds the survivors' joins
// past their client's deadline (i/o timeout on JoinGroup, then the group
// expires them and their partitions are lost and redone), seen in issue
// 30's runs and here (one run 332 s and failed, one with 2,089 duplicates);
// Apache Kafka answers a join within the rebalance timeout.
func TestChaosKills(t *testing.T) {
	if _, ok := testkit.ApacheKafka(t); !ok {
		t.Skip("kfake holds joins past the client's deadline after these kills: runs on Apache Kafka (WEBHOOKS_TEST_KAFKA=apache)")
	}
	bin := binaries(t)
	e := newEnv(t)
	const inFlight = 64
	e.vars["WEBHOOKS_DELIVERER_MAX_IN_FLIGHT"] = strconv.Itoa(inFlight)
	r := flakyReceiver(t, 2*time.Millisecond)
	e.subscribePair(r, "chaos.*", []string{"1s", "1s", "2s", "2s", "3s", "3s", "5s", "5s", "5s", "5s"})
	procs := map[string][]*stack.Process{}
	seq := 0
	start := func(component string) {
		seq++
		procs[component] = append(procs[component], e.startProc(filepath.Join(bin, component), fmt.Sprintf("%s-%d", component, seq)))
	}
	kill := func(component string) {
		t.Helper()
		p := procs[component][0]
		procs[component] = procs[component][1:]
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		start(component)
	}
	for component, n := range map[string]int{"dispatcher": 2, "deliverer": 3, "retrier": 2} {
		for range n {
			start(component)
		}
	}

	const rounds, perRound, keys = 5, 600, 100
	evs := keyedEvents(rounds*perRound, keys, "chaos.updated")
	kills := [][]string{{"deliverer"}, {"dispatcher"}, {"retrier"}, {"deliverer", "dispatcher"}}
	for round := range rounds {
		e.publish(evs[round*perRound : (round+1)*perRound]...)
		if round == len(kills) {
			break
		}
		half := round*perRound + perRound/2
		wait(t, 120*time.Second, fmt.Sprintf("half of round %d delivered", round), func() bool { return len(r.pairs()) >= 2*half })
		for _, c := range kills[round] {
			kill(c)
		}
	}
	started := time.Now()
	waitEveryEvent(t, e, r, evs, 240*time.Second)
	dups := duplicates(r)
	t.Logf("%d events, all delivered %v after the last round was published; duplicates: ordered %d, unordered %d",
		len(evs), time.Since(started).Round(time.Second), dups["ordered"], dups["unordered"])
	killed := 0
	for _, ks := range kills {
		killed += strings.Count(strings.Join(ks, " "), "deliverer")
	}
	for _, sub := range []string{"ordered", "unordered"} {
		if dups[sub] > killed*inFlight {
			t.Errorf("%s: %d duplicates, more than %d deliverers killed could have unsettled (%d each)", sub, dups[sub], killed, inFlight)
		}
	}
	assertKeyOrder(t, r, keys)
	assertFannedOutOnce(t, e, 2*len(evs))
}
