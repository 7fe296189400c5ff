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
// describe it: `env` names it, `envDefault` gives its default and `desc`
// says what it does (docs/configuration.md is generated from them).
type Var struct {
	Name    string
	Default string
	Desc    string
	field   string
}

// Vars lists the variables of cfg, a struct or a pointer to one, in field
// order, nested structs included. A field tagged `env:"-"` is skipped.
func Vars(cfg any) []Var {
	t := reflect.TypeOf(cfg)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Var
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case name != "":
			out = append(out, Var{Name: name, Default: f.Tag.Get("envDefault"), Desc: f.Tag.Get("desc"), field: f.Name})
		case f.Type.Kind() == reflect.Struct:
			out = append(out, Vars(reflect.New(f.Type).Interface())...)
		}
	}
	return out
}

// Parse sets the fields of cfg, a pointer to a struct tagged as Vars reads
// them, from getenv through github.com/caarlos0/env: an unset or empty
// variable takes its envDefault (or keeps the field's value when it has
// none). Every malformed variable is reported at once, each error naming
// the variable and quoting its value. parsers read the types caarlos0/env
// does not know.
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
	if !errors.As(err, &agg) {
		return err
	}
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		errs = append(errs, readable(e, vars, environ))
	}
	return errors.Join(errs...)
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
// name the variable and say what its value should be.
func readable(err error, vars []Var, environ map[string]string) error {
	var pe env.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	for _, v := range vars {
		val, set := environ[v.Name]
		if v.field != pe.Name || !set {
			continue
		}
		if want := expected(pe.Type); want != "" {
			return fmt.Errorf("%s: %q is not %s", v.Name, val, want)
		}
		return fmt.Errorf("%s: %w", v.Name, pe.Err)
	}
	return err
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
	if name, ok := nameIn(reflect.ValueOf(cfg).Elem(), f.Pointer(), f.Type().Elem()); ok {
		return name
	}
	panic(fmt.Sprintf("config.Name: no tagged field of %T at %p", cfg, field))
}

func nameIn(v reflect.Value, addr uintptr, t reflect.Type) (string, bool) {
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		switch {
		case name == "-":
		case name != "":
			if f.Type == t && fv.Addr().Pointer() == addr {
				return name, true
			}
		case f.Type.Kind() == reflect.Struct:
			if n, ok := nameIn(fv, addr, t); ok {
				return n, true
			}
		}
	}
	return "", false
}
