package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
)

// Breaking lists why next may refuse data that prev accepts; empty means
// the change only loosens (or leaves) the schema, as far as can be told.
// The check is conservative: a change it cannot judge (a new allOf, a
// changed pattern or $ref) is listed, and so is an example of prev that
// next refuses. A listed change needs force, or a new type.
func Breaking(prev, next *Type) []string {
	var out []string
	if next.doc != nil || prev.doc != nil {
		compare(prev.doc, next.doc, "", &out)
	}
	for i, ex := range prev.Examples {
		if v := next.Check(ex); v != nil {
			out = append(out, fmt.Sprintf("example %d of version %d is refused: %s", i, prev.Version, v))
		}
	}
	return out
}

// annotations never change what a schema accepts.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$comment": true, "$id": true, "$schema": true,
	"$anchor": true, "contentMediaType": true, "contentEncoding": true, "contentSchema": true,
}

// lowerBounds may only go down, upperBounds only up.
var (
	lowerBounds = []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
	upperBounds = []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
)

// compare appends to out how next, at path, accepts less than prev.
func compare(prev, next any, path string, out *[]string) {
	if reflect.DeepEqual(prev, next) || acceptsAll(next) {
		return
	}
	at := path
	if at == "" {
		at = "/"
	}
	if b, ok := next.(bool); ok && !b {
		*out = append(*out, at+": now refuses everything (false)")
		return
	}
	if b, ok := prev.(bool); ok && !b {
		return // it accepted nothing
	}
	pm, _ := prev.(map[string]any)
	nm, _ := next.(map[string]any)
	if pm == nil {
		pm = map[string]any{}
	}
	for _, kw := range sortedKeys(nm) {
		nv, pv := nm[kw], pm[kw]
		_, had := pm[kw]
		switch {
		case annotations[kw], kw == "$defs", kw == "definitions":
			// $defs are compared where they are used, through $ref
			// (which is compared as written).
		case kw == "properties", kw == "additionalProperties":
			// compareProperties, once per object
		case kw == "type":
			if !had || !types(pv).subset(types(nv)) {
				*out = append(*out, fmt.Sprintf("%s: type %v accepts less than %v", at, types(nv), types(pv)))
			}
		case kw == "required":
			for _, r := range strs(nv) {
				if !slices.Contains(strs(pv), r) {
					*out = append(*out, fmt.Sprintf("%s: property %q is now required", at, r))
				}
			}
		case kw == "enum":
			pe, _ := pv.([]any)
			ne, _ := nv.([]any)
			for _, v := range pe {
				if !slices.ContainsFunc(ne, func(w any) bool { return reflect.DeepEqual(v, w) }) {
					*out = append(*out, fmt.Sprintf("%s: enum drops %s", at, render(v)))
				}
			}
			if !had {
				*out = append(*out, at+": enum added")
			}
		case slices.Contains(lowerBounds, kw):
			if !had || number(nv) > number(pv) {
				*out = append(*out, fmt.Sprintf("%s: %s raised to %s", at, kw, render(nv)))
			}
		case slices.Contains(upperBounds, kw):
			if !had || number(nv) < number(pv) {
				*out = append(*out, fmt.Sprintf("%s: %s lowered to %s", at, kw, render(nv)))
			}
		case kw == "items":
			compare(orTrue(pv, had), nv, path+"/items", out)
		default:
			if !had || !reflect.DeepEqual(pv, nv) {
				*out = append(*out, fmt.Sprintf("%s: %s changed (cannot tell whether it accepts less)", at, kw))
			}
		}
	}
	compareProperties(pm, nm, path, out)
}

// compareProperties compares an object's named and other properties: a
// property new to the schema constrains what prev's additionalProperties
// allowed, and one dropped falls under next's additionalProperties.
func compareProperties(pm, nm map[string]any, path string, out *[]string) {
	pp, _ := pm["properties"].(map[string]any)
	np, _ := nm["properties"].(map[string]any)
	pa, hadPA := pm["additionalProperties"]
	na, hasNA := nm["additionalProperties"]
	for _, name := range sortedKeys(np) {
		before, ok := pp[name]
		if !ok {
			before = orTrue(pa, hadPA)
		}
		compare(before, np[name], path+"/properties/"+name, out)
	}
	for _, name := range sortedKeys(pp) {
		if _, ok := np[name]; !ok {
			compare(pp[name], orTrue(na, hasNA), path+"/properties/"+name, out)
		}
	}
	if hasNA {
		compare(orTrue(pa, hadPA), na, path+"/additionalProperties", out)
	}
}

// acceptsAll reports whether a schema accepts every value: true, or an
// object of annotations only.
func acceptsAll(s any) bool {
	switch s := s.(type) {
	case bool:
		return s
	case map[string]any:
		for k := range s {
			if !annotations[k] && k != "$defs" && k != "definitions" {
				return false
			}
		}
		return true
	}
	return false
}

func orTrue(v any, present bool) any {
	if !present {
		return true
	}
	return v
}

type typeSet []string

// types reads a type keyword: a name or a list of names.
func types(v any) typeSet {
	switch v := v.(type) {
	case string:
		return typeSet{v}
	case []any:
		return typeSet(strs(v))
	}
	return nil
}

// subset reports whether every type of s is accepted by one of o
// (integer by number too).
func (s typeSet) subset(o typeSet) bool {
	for _, t := range s {
		if !slices.Contains(o, t) && (t != "integer" || !slices.Contains(o, "number")) {
			return false
		}
	}
	return true
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// number reads a numeric keyword (json.Number, as the schema decoder
// keeps numbers).
func number(v any) float64 {
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		return f
	}
	return 0
}

func render(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}
