package process

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
)

type settings struct{ v string }

func load(getenv func(string) string) (settings, error) {
	if getenv("X") == "bad" {
		return settings{}, errors.New("X is bad")
	}
	return settings{v: getenv("X")}, nil
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		runErr error
		code   int
		stderr string
	}{
		{"clean", map[string]string{"X": "ok"}, nil, 0, ""},
		{"bad settings", map[string]string{"X": "bad"}, nil, 2, "comp: configuration: X is bad"},
		{"bad log level", map[string]string{"WEBHOOKS_LOG_LEVEL": "loud"}, nil, 2, "WEBHOOKS_LOG_LEVEL"},
		{"every bad setting at once", map[string]string{"X": "bad", "WEBHOOKS_LOG_LEVEL": "loud"}, nil, 2,
			"comp: configuration: X is bad\nWEBHOOKS_LOG_LEVEL"},
		{"run fails", nil, errors.New("boom"), 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			var got settings
			code := Run("comp", func(k string) string { return tt.env[k] }, &stderr, load,
				func(_ context.Context, c settings, _ *zap.Logger) error { got = c; return tt.runErr })
			if code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("code %d stderr %q, want %d containing %q", code, stderr.String(), tt.code, tt.stderr)
			}
			if tt.code != 2 && got.v != tt.env["X"] {
				t.Errorf("run got settings %+v", got)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		argv         []string
		code         int
		done         bool
		stdout, errs string
	}{
		{argv: nil},
		{argv: []string{"--version"}, done: true, stdout: "comp dev\n"},
		{argv: []string{"-version"}, done: true, stdout: "comp dev\n"},
		{argv: []string{"--help"}, code: 2, done: true, errs: "the only flag is --version"},
		{argv: []string{"--version", "x"}, code: 2, done: true, errs: "unexpected arguments"},
	} {
		var stdout, stderr strings.Builder
		code, done := args("comp", tc.argv, &stdout, &stderr)
		if code != tc.code || done != tc.done || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.errs) ||
			(tc.errs == "" && stderr.Len() > 0) {
			t.Errorf("args(%q) = %d, %v, stdout %q, stderr %q; want %d, %v, %q, %q",
				tc.argv, code, done, stdout.String(), stderr.String(), tc.code, tc.done, tc.stdout, tc.errs)
		}
	}
}
