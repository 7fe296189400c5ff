package config

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// EnvReader reads settings through a getenv function into the fields of a
// configuration whose defaults are already set. An unset or empty variable
// keeps the default; a malformed one is recorded as an error naming the
// variable and keeps the default too. Err reports every error at once, so
// an operator sees all bad settings in one run.
type EnvReader struct {
	getenv func(string) string
	errs   []error
}

// NewEnvReader returns an EnvReader over getenv.
func NewEnvReader(getenv func(string) string) *EnvReader {
	return &EnvReader{getenv: getenv}
}

// String sets *dst to the value of key when it is not empty.
func (r *EnvReader) String(key string, dst *string) {
	if v := r.getenv(key); v != "" {
		*dst = v
	}
}

// Int sets *dst to the value of key, a decimal integer.
func (r *EnvReader) Int(key string, dst *int) {
	if v := r.getenv(key); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %q is not an integer", key, v))
			return
		}
		*dst = n
	}
}

// Float sets *dst to the value of key, a floating-point number.
func (r *EnvReader) Float(key string, dst *float64) {
	if v := r.getenv(key); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %q is not a number", key, v))
			return
		}
		*dst = f
	}
}

// Bool sets *dst to the value of key, in any form strconv.ParseBool
// accepts (1, t, true, 0, f, false, ...).
func (r *EnvReader) Bool(key string, dst *bool) {
	if v := r.getenv(key); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %q is not a boolean", key, v))
			return
		}
		*dst = b
	}
}

// Duration sets *dst to the value of key, in time.ParseDuration's syntax
// ("1.5s", "2h45m"; a bare number other than 0 is refused).
func (r *EnvReader) Duration(key string, dst *time.Duration) {
	if v := r.getenv(key); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: %q is not a duration", key, v))
			return
		}
		*dst = d
	}
}

// Err returns the errors recorded so far, joined in the order the
// variables were read, or nil if there are none.
func (r *EnvReader) Err() error {
	return errors.Join(r.errs...)
}
