package config

import (
	"fmt"
	"math"
	"testing"
	"time"
)

type limits struct {
	Group    string        `env:"T_GROUP" envDefault:"g" validate:"required"`
	Slots    int           `env:"T_SLOTS" envDefault:"4" validate:"min=1"`
	Buffered int           `env:"T_BUFFERED" envDefault:"8" validate:"gtefield=Slots"`
	Percent  int           `env:"T_PERCENT" envDefault:"50" validate:"min=1,max=100"`
	Days     int           `env:"T_DAYS" envDefault:"0" validate:"min=0"`
	Wait     time.Duration `env:"T_WAIT" envDefault:"1s" validate:"gt=0"`
	Floor    time.Duration `env:"T_FLOOR" envDefault:"1s" validate:"min=100ms"`
	Rate     float64       `env:"T_RATE" envDefault:"1" validate:"finite,min=0"`
	Mode     string        `env:"T_MODE" envDefault:"accept" validate:"oneof=accept warn reject"`
	In       struct {
		Timeout time.Duration `env:"T_TIMEOUT" envDefault:"1ms" validate:"min=1ms"`
		Retry   time.Duration `env:"T_RETRY" envDefault:"1ms" validate:"gtefield=Timeout"`
	}
}

// TestCheckRules: each rule kind refuses a bad value with the words the
// components' tests and operators know, naming the variable, and lets
// the value at its bound pass.
func TestCheckRules(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // the whole error; "" for none
	}{
		{env: nil},
		{env: map[string]string{"T_SLOTS": "0"}, want: "T_SLOTS must be at least 1"},
		{env: map[string]string{"T_SLOTS": "1", "T_BUFFERED": "1"}},
		{env: map[string]string{"T_SLOTS": "9"}, want: "T_BUFFERED must be at least T_SLOTS"},
		{env: map[string]string{"T_PERCENT": "101"}, want: "T_PERCENT must be at most 100"},
		{env: map[string]string{"T_PERCENT": "0"}, want: "T_PERCENT must be at least 1"},
		{env: map[string]string{"T_PERCENT": "100"}},
		{env: map[string]string{"T_DAYS": "-1"}, want: "T_DAYS must not be negative"},
		{env: map[string]string{"T_WAIT": "0s"}, want: "T_WAIT must be positive"},
		{env: map[string]string{"T_WAIT": "-1s"}, want: "T_WAIT must be positive"},
		{env: map[string]string{"T_WAIT": "1ns"}},
		{env: map[string]string{"T_FLOOR": "99ms"}, want: "T_FLOOR must be at least 100ms"},
		{env: map[string]string{"T_FLOOR": "100ms"}},
		{env: map[string]string{"T_RATE": "NaN"}, want: "T_RATE must be a finite number"},
		{env: map[string]string{"T_RATE": "+Inf"}, want: "T_RATE must be a finite number"},
		{env: map[string]string{"T_RATE": "-0.5"}, want: "T_RATE must not be negative"},
		{env: map[string]string{"T_RATE": "0"}},
		{env: map[string]string{"T_MODE": "drop"}, want: `T_MODE: "drop" is not accept, warn or reject`},
		{env: map[string]string{"T_MODE": "warn"}},
		{env: map[string]string{"T_TIMEOUT": "500us"}, want: "T_TIMEOUT must be at least 1ms"},
		{env: map[string]string{"T_TIMEOUT": "2ms"}, want: "T_RETRY must be at least T_TIMEOUT"},
		// Every bad variable at once, a malformed one among them, which
		// is not checked against its rules too.
		{env: map[string]string{"T_SLOTS": "0", "T_WAIT": "soon", "T_MODE": "x"},
			want: "T_WAIT: \"soon\" is not a duration (e.g. 1.5s, 2h45m)\nT_SLOTS must be at least 1\nT_MODE: \"x\" is not accept, warn or reject"},
	} {
		t.Run(fmt.Sprint(tc.env), func(t *testing.T) {
			var c limits
			err := Parse(getenv(tc.env), &c)
			if got := errText(err); got != tc.want {
				t.Fatalf("Parse error\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestCheckRequired: required refuses the zero value, which Parse never
// leaves a field with a default, so it is tried on a configuration built
// in code (Check), with every other field wrong too.
func TestCheckRequired(t *testing.T) {
	c := limits{Buffered: -1, Percent: 200, Days: -1, Wait: -1, Rate: math.Inf(-1), Mode: "Accept"}
	want := "T_GROUP must not be empty\nT_SLOTS must be at least 1\nT_BUFFERED must be at least T_SLOTS\n" +
		"T_PERCENT must be at most 100\nT_DAYS must not be negative\nT_WAIT must be positive\nT_FLOOR must be at least 100ms\n" +
		"T_RATE must be a finite number\nT_MODE: \"Accept\" is not accept, warn or reject\nT_TIMEOUT must be at least 1ms"
	if got := errText(Check(&c)); got != want {
		t.Fatalf("Check error\n%s\nwant\n%s", got, want)
	}
}

// TestCheckBadTag: a tag that is no rule, or bounds a field it cannot,
// is an error naming the variable rather than a rule silently skipped.
func TestCheckBadTag(t *testing.T) {
	for _, tc := range []struct {
		cfg  any
		want string
	}{
		{&struct {
			N int `env:"T_N" validate:"len=3"`
		}{}, `T_N: validate tag "len=3": unknown rule len`},
		{&struct {
			S string `env:"T_S" validate:"min=1"`
		}{}, `T_S: validate tag "min=1": string is not a number`},
		{&struct {
			D time.Duration `env:"T_D" validate:"min=1"`
		}{}, `T_D: validate tag "min=1": time: missing unit in duration "1"`},
		{&struct {
			N int `env:"T_N" validate:"gtefield=M"`
		}{}, `T_N: validate tag "gtefield=M": no numeric variable M of type int beside it`},
	} {
		if got := errText(Check(tc.cfg)); got != tc.want {
			t.Errorf("Check = %q, want %q", got, tc.want)
		}
	}
}

// TestVarsValid: the docs say each rule in the words of its error.
func TestVarsValid(t *testing.T) {
	got := map[string]string{}
	for _, v := range Vars(limits{}) {
		got[v.Name] = v.Valid
	}
	for name, want := range map[string]string{"T_GROUP": "not empty", "T_SLOTS": "at least 1", "T_BUFFERED": "at least T_SLOTS",
		"T_PERCENT": "at least 1, at most 100", "T_DAYS": "not negative", "T_WAIT": "positive", "T_FLOOR": "at least 100ms",
		"T_RATE": "a finite number, not negative", "T_MODE": "accept, warn or reject", "T_RETRY": "at least T_TIMEOUT"} {
		if got[name] != want {
			t.Errorf("%s: Valid = %q, want %q", name, got[name], want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
