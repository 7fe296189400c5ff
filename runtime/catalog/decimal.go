package catalog

import (
	"cmp"
	"math/big"
)

// Bounds of the numbers the fast path reads; a number past them is left
// to the library. Within them the library's big.Rat reads every literal
// (it gives up on a power of ten past a million, and the keywords that
// need the value then fail, or panic), and reading one stays cheap.
const (
	maxNumberDigits   = 1000
	maxNumberExponent = 10000
)

// decimal is a JSON number read exactly: 0.d × 10^exp, where the
// significant digits d are hi followed by lo, with no leading or
// trailing zeros (none: the number is zero, exp is 0). hi and lo are the
// integer and fraction digits of the literal, trimmed, so reading a
// number copies nothing.
type decimal struct {
	neg    bool
	hi, lo []byte
	exp    int
}

// read sets d to the number at the start of b (JSON grammar, RFC 8259
// section 6) and returns the length of its literal; -1 if b does not
// start with a number or the number is past the bounds.
func (d *decimal) read(b []byte) int {
	*d = decimal{}
	n := 0
	if n < len(b) && b[n] == '-' {
		d.neg = true
		n++
	}
	start := n
	switch {
	case n < len(b) && b[n] == '0':
		n++
	case n < len(b) && '1' <= b[n] && b[n] <= '9':
		n = digitsEnd(b, n)
	default:
		return -1
	}
	d.hi = b[start:n]
	if n < len(b) && b[n] == '.' {
		start = n + 1
		if n = digitsEnd(b, start); n == start {
			return -1
		}
		d.lo = b[start:n]
	}
	exp := 0
	if n < len(b) && (b[n] == 'e' || b[n] == 'E') {
		n++
		neg := n < len(b) && b[n] == '-'
		if n < len(b) && (b[n] == '-' || b[n] == '+') {
			n++
		}
		start = n
		for n < len(b) && '0' <= b[n] && b[n] <= '9' {
			if exp = exp*10 + int(b[n]-'0'); exp > maxNumberExponent {
				return -1
			}
			n++
		}
		if n == start {
			return -1
		}
		if neg {
			exp = -exp
		}
	}
	if len(d.hi)+len(d.lo) > maxNumberDigits {
		return -1
	}
	d.normalize(exp)
	return n
}

// digitsEnd is the index of the first byte at or after i in b that is
// not a digit.
func digitsEnd(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// normalize trims the digits of a literal whose exponent is exp.
func (d *decimal) normalize(exp int) {
	d.exp = len(d.hi) + exp
	for len(d.hi) > 0 && d.hi[0] == '0' {
		d.hi, d.exp = d.hi[1:], d.exp-1
	}
	if len(d.hi) == 0 {
		for len(d.lo) > 0 && d.lo[0] == '0' {
			d.lo, d.exp = d.lo[1:], d.exp-1
		}
	}
	for len(d.lo) > 0 && d.lo[len(d.lo)-1] == '0' {
		d.lo = d.lo[:len(d.lo)-1]
	}
	if len(d.lo) == 0 {
		for len(d.hi) > 0 && d.hi[len(d.hi)-1] == '0' {
			d.hi = d.hi[:len(d.hi)-1]
		}
	}
	if d.digits() == 0 {
		*d = decimal{}
	}
}

func (d decimal) digits() int { return len(d.hi) + len(d.lo) }

// digit is the i-th significant digit, '0' to '9'.
func (d decimal) digit(i int) byte {
	if i < len(d.hi) {
		return d.hi[i]
	}
	return d.lo[i-len(d.hi)]
}

// isInt reports whether d is a whole number, as JSON Schema's "integer"
// means: 1.0 and 1e2 are.
func (d decimal) isInt() bool { return d.digits() <= d.exp }

func (d decimal) sign() int {
	switch {
	case d.digits() == 0:
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// compareDecimals is -1, 0 or 1 as a is less than, equal to or greater
// than b.
func compareDecimals(a, b decimal) int {
	if sa, sb := a.sign(), b.sign(); sa != sb || sa == 0 {
		return cmp.Compare(sa, sb)
	}
	c := cmp.Compare(a.exp, b.exp)
	for i := 0; c == 0 && i < min(a.digits(), b.digits()); i++ {
		c = cmp.Compare(a.digit(i), b.digit(i))
	}
	if c == 0 {
		c = cmp.Compare(a.digits(), b.digits())
	}
	if a.neg {
		return -c
	}
	return c
}

// ratDecimal is a bound of a schema as a decimal; ok is false if it has
// no exact decimal form (a bound read from JSON always has one) or is past
// the bounds.
func ratDecimal(r *big.Rat) (decimal, bool) {
	// A fraction in lowest terms is a finite decimal when its denominator
	// is 2^twos × 5^fives, with max(twos, fives) digits after the point.
	den := new(big.Int).Set(r.Denom())
	twos := den.TrailingZeroBits()
	den.Rsh(den, twos)
	fives, five, rem := uint(0), big.NewInt(5), new(big.Int)
	for den.Cmp(big.NewInt(1)) != 0 {
		if den.QuoRem(den, five, rem); rem.Sign() != 0 {
			return decimal{}, false
		}
		fives++
	}
	lit := []byte(r.FloatString(int(max(twos, fives))))
	var d decimal
	ok := d.read(lit) == len(lit)
	return d, ok
}

// multiple is a multipleOf divisor: mant × 10^exp, with mant below
// 10^17 so that a remainder times ten fits in a uint64.
type multiple struct {
	mant uint64
	exp  int
}

// newMultiple is the divisor d; ok is false if d is not positive or has
// more than 17 significant digits.
func newMultiple(d decimal) (m multiple, ok bool) {
	if d.sign() <= 0 || d.digits() > 17 {
		return m, false
	}
	for i := range d.digits() {
		m.mant = m.mant*10 + uint64(d.digit(i)-'0')
	}
	m.exp = d.exp - d.digits()
	return m, true
}

// divides reports whether v is a whole multiple of m. Write v as
// D × 10^(k + m.exp), D its digits as a whole number. If k < 0, v / m is
// D / (mant × 10^-k), which is not whole: D does not end in 0. Otherwise
// v / m is D × 10^k / mant, whole when the remainder is 0.
func (m multiple) divides(v decimal) bool {
	if v.digits() == 0 {
		return true
	}
	k := v.exp - v.digits() - m.exp
	if k < 0 {
		return false
	}
	var r uint64
	for i := range v.digits() {
		r = (r*10 + uint64(v.digit(i)-'0')) % m.mant
	}
	for ; k > 0 && r != 0; k-- {
		r = r * 10 % m.mant
	}
	return r == 0
}
