package config

import (
	"testing"
	"time"
)

// envConfig is a configuration as EnvReader's callers have it: defaults set
// before anything is read.
type envConfig struct {
	S string
	N int
	F float64
	B bool
	D time.Duration
}

var envDefaults = envConfig{S: "def", N: 7, F: 1.5, B: false, D: time.Second}

func TestEnvReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    envConfig
		wantErr string // the whole error text; empty means no error
	}{
		{
			name: "unset keeps the defaults",
			env:  nil,
			want: envDefaults,
		},
		{
			name: "empty keeps the defaults",
			env:  map[string]string{"S": "", "N": "", "F": "", "B": "", "D": ""},
			want: envDefaults,
		},
		{
			name: "valid values",
			env:  map[string]string{"S": "x", "N": "-3", "F": "0.25", "B": "true", "D": "1m30s"},
			want: envConfig{S: "x", N: -3, F: 0.25, B: true, D: 90 * time.Second},
		},
		{
			name: "zero values are values",
			env:  map[string]string{"N": "0", "F": "0", "D": "0"},
			want: envConfig{S: "def", N: 0, F: 0, D: 0},
		},
		{
			name:    "malformed integer",
			env:     map[string]string{"N": "abc"},
			want:    envDefaults,
			wantErr: `N: "abc" is not an integer`,
		},
		{
			name:    "fraction is not an integer",
			env:     map[string]string{"N": "1.5"},
			want:    envDefaults,
			wantErr: `N: "1.5" is not an integer`,
		},
		{
			name:    "malformed duration",
			env:     map[string]string{"D": "5"},
			want:    envDefaults,
			wantErr: `D: "5" is not a duration`,
		},
		{
			name:    "malformed number",
			env:     map[string]string{"F": "fast"},
			want:    envDefaults,
			wantErr: `F: "fast" is not a number`,
		},
		{
			name:    "malformed boolean",
			env:     map[string]string{"B": "maybe"},
			want:    envDefaults,
			wantErr: `B: "maybe" is not a boolean`,
		},
		{
			name: "several errors joined in reading order, good values still read",
			env:  map[string]string{"S": "x", "N": "many", "F": "2", "B": "yes", "D": "soon"},
			want: envConfig{S: "x", N: 7, F: 2, B: false, D: time.Second},
			wantErr: `N: "many" is not an integer` + "\n" +
				`B: "yes" is not a boolean` + "\n" +
				`D: "soon" is not a duration`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := envDefaults
			r := NewEnvReader(env(tc.env))
			r.String("S", &got.S)
			r.Int("N", &got.N)
			r.Float("F", &got.F)
			r.Bool("B", &got.B)
			r.Duration("D", &got.D)
			err := r.Err()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Err = %v, want nil", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Err = nil, want %q", tc.wantErr)
			case err != nil && err.Error() != tc.wantErr:
				t.Fatalf("Err = %q, want %q", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("read %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestEnvReaderMessage: the error text operators (and the docs) see for a
// real variable.
func TestEnvReaderMessage(t *testing.T) {
	n := 1
	r := NewEnvReader(env(map[string]string{"WEBHOOKS_X": "abc"}))
	r.Int("WEBHOOKS_X", &n)
	if err := r.Err(); err == nil || err.Error() != `WEBHOOKS_X: "abc" is not an integer` {
		t.Fatalf("Err = %v", err)
	}
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}
