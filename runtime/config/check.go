package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The rules a `validate` tag may hold, comma-separated, in the words of
// github.com/go-playground/validator so that they read as Go programmers
// know them (docs/adr/0038-config-validation.md says why not the library):
//
//	required      not the zero value ("not empty")
//	min=P, max=P  a number or duration at least, at most P ("min=0": not negative)
//	gt=P          more than P ("gt=0": positive)
//	gtefield=F    at least the field F of the same struct, named by its variable
//	oneof=A B C   one of the words
//	finite        a float that is neither NaN nor infinite
//
// A field breaking several rules is reported by the first.
type rule struct {
	name, param string
	// other is the variable of the field gtefield names.
	other string
}

// rulesOf reads the validate tag of the field f of the struct type owner.
func rulesOf(owner reflect.Type, f reflect.StructField) []rule {
	tag := f.Tag.Get("validate")
	if tag == "" {
		return nil
	}
	var rs []rule
	for _, s := range strings.Split(tag, ",") {
		r := rule{}
		r.name, r.param, _ = strings.Cut(s, "=")
		if o, ok := owner.FieldByName(r.param); ok && r.name == "gtefield" {
			r.other, _, _ = strings.Cut(o.Tag.Get("env"), ",")
		}
		rs = append(rs, r)
	}
	return rs
}

// words says what r asks of a value, as the docs show it; an error puts
// "must be" before it, or "must not be" in place of its "not".
func (r rule) words() string {
	switch {
	case r.name == "required":
		return "not empty"
	case r.name == "finite":
		return "a finite number"
	case r.name == "oneof":
		if w := strings.Fields(r.param); len(w) > 1 {
			return strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
		}
		return r.param
	case r.name == "gtefield":
		return "at least " + r.other
	case r.name == "gt" && r.param == "0":
		return "positive"
	case r.name == "gt":
		return "more than " + r.param
	case r.name == "min" && r.param == "0":
		return "not negative"
	case r.name == "min":
		return "at least " + r.param
	case r.name == "max":
		return "at most " + r.param
	}
	return r.name + "=" + r.param
}

// words says rs in words, for the docs.
func words(rs []rule) string {
	w := make([]string, len(rs))
	for i, r := range rs {
		w[i] = r.words()
	}
	return strings.Join(w, ", ")
}

// Check reports each field of cfg, a pointer to a struct tagged as Vars
// reads it, that breaks a rule of its validate tag: one error per field,
// naming its variable, all joined. Parse calls it after parsing; call it
// for a configuration built in code. A tag that is no rule is reported
// as the field's error, so any test loading the configuration finds it.
func Check(cfg any) error { return check(cfg, nil) }

// check is Check without the variables in skip (those that did not parse).
func check(cfg any, skip map[string]bool) error {
	var errs []error
	walk(reflect.ValueOf(cfg).Elem(), func(owner reflect.Value, i int, name string) {
		if !skip[name] {
			errs = append(errs, checkField(owner, i, name))
		}
	})
	return errors.Join(errs...)
}

// checkField returns the error of the first rule that the field i of
// owner, the variable name, breaks; nil when it keeps them all.
func checkField(owner reflect.Value, i int, name string) error {
	f, v := owner.Type().Field(i), owner.Field(i)
	for _, r := range rulesOf(owner.Type(), f) {
		ok, err := r.holds(v, owner)
		switch {
		case err != nil:
			return fmt.Errorf("%s: validate tag %q: %w", name, f.Tag.Get("validate"), err)
		case !ok && r.name == "oneof":
			return fmt.Errorf("%s: %q is not %s", name, v.String(), r.words())
		case !ok:
			if w, not := strings.CutPrefix(r.words(), "not "); not {
				return fmt.Errorf("%s must not be %s", name, w)
			}
			return fmt.Errorf("%s must be %s", name, r.words())
		}
	}
	return nil
}

// holds reports whether v, a field of owner, keeps r.
func (r rule) holds(v, owner reflect.Value) (bool, error) {
	switch r.name {
	case "required":
		return !v.IsZero(), nil
	case "finite":
		return v.CanFloat() && !math.IsNaN(v.Float()) && !math.IsInf(v.Float(), 0), nil
	case "oneof":
		return slices.Contains(strings.Fields(r.param), v.String()), nil
	case "gtefield":
		o := owner.FieldByName(r.param)
		if !o.IsValid() || o.Type() != v.Type() || r.other == "" || !v.CanInt() && !v.CanFloat() {
			return false, fmt.Errorf("no numeric variable %s of type %s beside it", r.param, v.Type())
		}
		return compare(v, o) >= 0, nil
	case "min", "max", "gt":
		p, err := parseAs(v.Type(), r.param)
		if err != nil {
			return false, err
		}
		c := compare(v, p)
		return r.name == "min" && c >= 0 || r.name == "max" && c <= 0 || r.name == "gt" && c > 0, nil
	}
	return false, errors.New("unknown rule " + r.name)
}

// parseAs reads s as a value of t, a duration or another number.
func parseAs(t reflect.Type, s string) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	switch {
	case t == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		v.SetInt(int64(d))
		return v, err
	case v.CanInt():
		n, err := strconv.ParseInt(s, 10, 64)
		v.SetInt(n)
		return v, err
	case v.CanFloat():
		f, err := strconv.ParseFloat(s, 64)
		v.SetFloat(f)
		return v, err
	}
	return v, fmt.Errorf("%s is not a number", t)
}

// compare orders a and b, numbers of one type; NaN comes first.
func compare(a, b reflect.Value) int {
	if a.CanFloat() {
		return cmp.Compare(a.Float(), b.Float())
	}
	return cmp.Compare(a.Int(), b.Int())
}
