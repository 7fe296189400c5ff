package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Var is one environment variable of a configuration struct, as its tags
// describe it: `env` names it, `envDefault` gives its default, `desc` says
// what it does and `validate` what values it takes (docs/configuration.md
// is generated from them).
type Var struct {
	Name    string
	Default string
	Desc    string
	// Valid says the rules of the validate tag in words ("at least 1",
	// "positive"); empty when any value goes.
	Valid string
	field string
}

// Vars lists the variables of cfg, a struct or a pointer to one, in field
// order, nested structs included. A field tagged `env:"-"` is skipped.
func Vars(cfg any) []Var {
	t := reflect.TypeOf(cfg)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Var
	walk(reflect.New(t).Elem(), func(owner reflect.Value, i int, name string) {
		f := owner.Type().Field(i)
		out = append(out, Var{Name: name, Default: f.Tag.Get("envDefault"), Desc: f.Tag.Get("desc"),
			Valid: words(rulesOf(owner.Type(), f)), field: f.Name})
	})
	return out
}

// walk calls visit with each field of the struct v that an `env` tag
// names, in field order, nested untagged structs included, `env:"-"` and
// unexported fields skipped: owner is the struct holding the field, i its
// index there, name the variable.
func walk(v reflect.Value, visit func(owner reflect.Value, i int, name string)) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name != "":
			visit(v, i, name)
		case f.Type.Kind() == reflect.Struct:
			walk(v.Field(i), visit)
		}
	}
}

// Parse sets the fields of cfg, a pointer to a struct tagged as Vars reads
// them, from getenv through github.com/caarlos0/env: an unset or empty
// variable takes its envDefault (or keeps the field's value when it has
// none). Then it checks the validate tags (Check) of the fields that
// parsed. Every malformed or invalid variable is reported at once, each
// error naming the variable. parsers read the types caarlos0/env does not
// know.
func Parse(getenv func(string) string, cfg any, parsers ...Parser) error {
	vars := Vars(cfg)
	environ := make(map[string]string, len(vars))
	for _, v := range vars {
		if s := getenv(v.Name); s != "" {
			environ[v.Name] = s
		}
	}
	funcs := make(map[reflect.Type]env.ParserFunc, len(parsers))
	for _, p := range parsers {
		funcs[p.t] = p.parse
	}
	err := env.ParseWithOptions(cfg, env.Options{Environment: environ, FuncMap: funcs})
	var agg env.AggregateError
	if err != nil && !errors.As(err, &agg) {
		return err
	}
	malformed := make(map[string]bool, len(agg.Errors))
	errs := make([]error, 0, len(agg.Errors)+1)
	for _, e := range agg.Errors {
		name, err := readable(e, vars, environ)
		malformed[name] = true
		errs = append(errs, err)
	}
	return errors.Join(append(errs, check(cfg, malformed))...)
}

// A Parser reads a field type that caarlos0/env has no parser for.
type Parser struct {
	t     reflect.Type
	parse env.ParserFunc
}

// ParserFor returns the Parser of the fields of type T.
func ParserFor[T any](parse func(string) (T, error)) Parser {
	return Parser{t: reflect.TypeFor[T](), parse: func(v string) (any, error) { return parse(v) }}
}

// readable rewrites a caarlos0/env error, which names the struct field, to
// name the variable and say what its value should be; name is the
// variable ("" when the error names none).
func readable(err error, vars []Var, environ map[string]string) (name string, _ error) {
	var pe env.ParseError
	if !errors.As(err, &pe) {
		return "", err
	}
	for _, v := range vars {
		val, set := environ[v.Name]
		if v.field != pe.Name || !set {
			continue
		}
		if want := expected(pe.Type); want != "" {
			return v.Name, fmt.Errorf("%s: %q is not %s", v.Name, val, want)
		}
		return v.Name, fmt.Errorf("%s: %w", v.Name, pe.Err)
	}
	return "", err
}

func expected(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "a duration (e.g. 1.5s, 2h45m)"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number"
	}
	return ""
}

// Name returns the variable that sets the field at address field of cfg, a
// pointer to a struct tagged as Vars reads it (nested structs too), so that
// checks name variables without repeating them. It panics when field is no
// tagged field of cfg: a mistake in the code, which any test of the check
// finds.
func Name(cfg, field any) string {
	f := reflect.ValueOf(field)
	var found string
	walk(reflect.ValueOf(cfg).Elem(), func(owner reflect.Value, i int, name string) {
		if fv := owner.Field(i); fv.Type() == f.Type().Elem() && fv.Addr().Pointer() == f.Pointer() {
			found = name
		}
	})
	if found == "" {
		panic(fmt.Sprintf("config.Name: no tagged field of %T at %p", cfg, field))
	}
	return found
}
