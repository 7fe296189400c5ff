package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Wait time.Duration `env:"T_WAIT" envDefault:"2s" desc:"how long"`
}

type settings struct {
	S       string         `env:"T_S" envDefault:"def" desc:"a string"`
	N       int            `env:"T_N" envDefault:"7"`
	F       float64        `env:"T_F" envDefault:"1.5"`
	B       bool           `env:"T_B"`
	D       time.Duration  `env:"T_D" envDefault:"1s"`
	CIDRs   []netip.Prefix `env:"T_CIDRS"`
	In      inner
	Skipped string `env:"-"`
	Plain   int
}

// prefixes parses a list of CIDRs, as the deliverer's allowlist.
func prefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range SplitList(v) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR range", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParse(t *testing.T) {
	defaults := settings{S: "def", N: 7, F: 1.5, D: time.Second, In: inner{Wait: 2 * time.Second}}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want settings
		errs []string // substrings of the error, each on its own line; none: no error
	}{
		{name: "unset takes the defaults", want: defaults},
		{name: "empty takes the default", env: map[string]string{"T_S": "", "T_N": ""}, want: defaults},
		{name: "set", env: map[string]string{"T_S": "x", "T_N": "-3", "T_F": "0.25", "T_B": "true", "T_D": "1m30s",
			"T_WAIT": "5ms", "T_CIDRS": "10.0.0.0/8, 192.168.1.7/16"},
			want: settings{S: "x", N: -3, F: 0.25, B: true, D: 90 * time.Second, In: inner{Wait: 5 * time.Millisecond},
				CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}}},
		{name: "every error at once", env: map[string]string{"T_N": "many", "T_F": "x", "T_B": "yes please", "T_D": "5",
			"T_WAIT": "soon", "T_CIDRS": "10.0.0.0/33"},
			errs: []string{`T_N: "many" is not an integer`, `T_F: "x" is not a number`, `T_B: "yes please" is not true or false`,
				`T_D: "5" is not a duration`, `T_WAIT: "soon" is not a duration`, `T_CIDRS: "10.0.0.0/33" is not a CIDR range`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got settings
			err := Parse(getenv(tc.env), &got, ParserFor(prefixes))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("Parse = %+v, nil; want errors %q", got, tc.errs)
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tc.errs) {
					t.Errorf("error has %d lines, want %d: %v", len(lines), len(tc.errs), err)
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVars(t *testing.T) {
	got := Vars(settings{})
	var names []string
	for _, v := range got {
		names = append(names, v.Name)
	}
	if want := "T_S T_N T_F T_B T_D T_CIDRS T_WAIT"; strings.Join(names, " ") != want {
		t.Fatalf("Vars = %v, want %s", names, want)
	}
	if got[0].Default != "def" || got[0].Desc != "a string" || got[6].Desc != "how long" {
		t.Fatalf("Vars[0] = %+v, Vars[6] = %+v", got[0], got[6])
	}
}

func TestName(t *testing.T) {
	var s settings
	for want, field := range map[string]any{"T_S": &s.S, "T_N": &s.N, "T_WAIT": &s.In.Wait, "T_CIDRS": &s.CIDRs} {
		if got := Name(&s, field); got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Name of an untagged field did not panic")
		}
	}()
	Name(&s, &s.Plain)
}
