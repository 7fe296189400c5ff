package catalog

import (
	"math/big"
	"testing"
)

// Decimals compare, tell whole numbers and divide as big.Rat does,
// which is how the library reads numbers.
func TestDecimalsAgreeWithBigRat(t *testing.T) {
	var lits []string
	for _, m := range []string{"0", "-0", "1", "-1", "10", "100", "1.5", "0.05", "-0.05", "2.50", "120.000",
		"12345678901234567890", "0.000000000000000000001", "3", "0.3", "7.5", "25", "0.01", "1.01"} {
		for _, e := range []string{"", "e0", "e1", "e-1", "E+2", "e-3", "e20", "e-25", "e0000"} {
			lits = append(lits, m+e)
		}
	}
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("big.Rat cannot read %s", s)
		}
		return r
	}
	read := func(s string) decimal {
		var d decimal
		if n := d.read([]byte(s)); n != len(s) {
			t.Fatalf("read(%s) = %d", s, n)
		}
		return d
	}
	for _, a := range lits {
		da, ra := read(a), rat(a)
		if da.isInt() != ra.IsInt() {
			t.Errorf("isInt(%s) = %v", a, da.isInt())
		}
		if back, ok := ratDecimal(ra); !ok || compareDecimals(back, da) != 0 {
			t.Errorf("ratDecimal(%s) = %+v, %v", a, back, ok)
		}
		for _, b := range lits {
			db, rb := read(b), rat(b)
			if got, want := compareDecimals(da, db), ra.Cmp(rb); got != want {
				t.Errorf("compareDecimals(%s, %s) = %d, want %d", a, b, got, want)
			}
			if m, ok := newMultiple(db); ok {
				if got, want := m.divides(da), new(big.Rat).Quo(ra, rb).IsInt(); got != want {
					t.Errorf("%s divides %s: %v, want %v", b, a, got, want)
				}
			}
		}
	}
}
