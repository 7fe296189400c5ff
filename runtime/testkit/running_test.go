package testkit

import (
	"context"
	"errors"
	"testing"
)

func TestRunning(t *testing.T) {
	errStopped := errors.New("stopped")
	r := Go(t, func(ctx context.Context) error {
		<-ctx.Done()
		return errStopped
	})
	if r.Exited() {
		t.Fatal("exited before Stop")
	}
	if err := r.Stop(t); !errors.Is(err, errStopped) {
		t.Fatalf("Stop = %v, want %v", err, errStopped)
	}
	if !r.Exited() {
		t.Fatal("not exited after Stop")
	}
}
