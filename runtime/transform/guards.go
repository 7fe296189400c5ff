package transform

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"

	"github.com/hookpipe/hookpipe/runtime/jsondepth"
)

// goja's builtins are Go code, which the interrupt of the time limit does
// not reach, and some of them loop or allocate in proportion to a number
// the script chooses: "x".repeat(1e9), new Array(1e9).fill(0),
// Array.prototype.every.call({length: 1e15}, f), a spread of a sparse array
// whose length is 2**32-1, new Uint8Array(4e9) (an allocation the Go
// runtime cannot survive), a join of a million references to a large
// string, a flat of an array holding itself (a Go stack overflow, fatal),
// eval of a million nested parentheses (the same). A realm replaces those
// builtins, once, with guards that refuse such a
// request, as a LimitError, before the builtin starts: at most
// Limits.Memory/16 elements taken or made, Limits.Memory/2 characters
// made, maxNesting levels recursed. What remains unguarded: a builtin
// looping on a native iterator the script built from builtins (next:
// Object), and for-in, which lists every key of what the script holds at
// once; the time limit then returns the call after the grace, and the
// memory limit stops the script once the builtin returns.

// regexpTimeout bounds one match of a regular expression goja gives to
// regexp2 (those RE2 cannot run: backreferences, lookaround), which
// backtracks inside one builtin and can take exponential time. It is
// regexp2's default, process-wide, for every expression compiled after
// init; only goja uses regexp2 here. A match that times out is no match,
// and by then the time limit, when it is shorter, has stopped the script.
const regexpTimeout = time.Second

func init() { regexp2.DefaultMatchTimeout = regexpTimeout }

// maxNesting bounds the nesting the guarded builtins recurse through
// (join, flat, JSON): deeper than data needs, far shallower than the Go
// stack allows.
const maxNesting = 1000

// removed are the globals a call does not have: typed arrays allocate their
// length at once, and code made from strings is parsed recursively by Go.
var removed = []string{
	"eval", "ArrayBuffer", "SharedArrayBuffer", "DataView", "Atomics",
	"Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array",
	"Uint32Array", "Float16Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
}

// lengthBound are the methods of Array.prototype that loop up to
// this.length without running the script in between.
var lengthBound = []string{
	"copyWithin", "entries", "every", "fill", "filter", "find", "findIndex", "findLast",
	"findLastIndex", "forEach", "includes", "indexOf", "keys", "lastIndexOf", "map", "pop",
	"push", "reduce", "reduceRight", "reverse", "shift", "slice", "some", "sort", "splice",
	"toReversed", "toSorted", "toSpliced", "unshift", "values", "with",
}

// functionPrototypes returns the prototypes of generator and async
// functions, whose constructors make code from strings.
var functionPrototypes = goja.MustCompile("prototypes.js",
	`[Object.getPrototypeOf(function*(){}), Object.getPrototypeOf(async function(){})]`, true)

// guards are a realm's guarded builtins, with the originals the package
// itself uses, and the call running on the realm.
type guards struct {
	c         *call
	r         *goja.Runtime
	maxElems  int64
	maxChars  int64
	joining   []*goja.Object
	parse     goja.Callable
	stringify goja.Callable
	keyFor    goja.Callable
	// symbols is the call's registry of Symbol.for.
	symbols map[string]*goja.Symbol
	// intrinsic reports whether an object was frozen with the realm;
	// nil when the realm is not frozen.
	intrinsic func(*goja.Object) bool
	// lazies are the call's objects of the event's data (lazy.go), by
	// proxy and by target; traps are their traps, reflects the Reflect
	// functions the traps forward with.
	lazies   map[*goja.Object]*lazy
	traps    goja.ProxyTrapConfig
	reflects map[string]goja.Callable
}

// begin readies the guards and the runtime for c, under its script's
// limits.
func (g *guards) begin(c *call) {
	l := c.s.limits
	g.c = c
	g.maxElems, g.maxChars = l.Memory/16, l.Memory/2
	g.joining = g.joining[:0]
	g.symbols = nil
	clear(g.lazies)
	g.r.SetMaxCallStackSize(l.CallDepth)
}

// hook checks a call of a guarded builtin and returns its arguments,
// which it may replace.
type hook func(call goja.FunctionCall) []goja.Value

// installGuards replaces the realm's builtins by guards, as a builtin
// (call.try): it panics with what went wrong.
func installGuards(rm *realm) *guards {
	protos, err := rm.rt.RunProgram(functionPrototypes)
	must(err)
	g := &guards{r: rm.rt}
	g.install(protos.(*goja.Object))
	return g
}

func (g *guards) install(protos *goja.Object) {
	global := g.r.GlobalObject()
	for _, name := range removed {
		must(global.Delete(name))
	}
	g.noCodeFromStrings(global, protos)

	json := object(global, "JSON")
	g.parse, g.stringify = callable(json, "parse"), callable(json, "stringify")
	g.wrap(json, "parse", g.parseArgs)
	g.wrap(json, "stringify", g.stringifyArgs)

	array := object(global, "Array")
	proto := object(array, "prototype")
	for _, name := range lengthBound {
		g.wrap(proto, name, g.thisLength)
	}
	must(proto.DefineDataPropertySymbol(goja.SymIterator, proto.Get("values"), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	g.wrap(proto, "concat", g.concatArgs)
	g.wrap(proto, "flat", g.flatArgs)
	g.wrap(proto, "flatMap", g.flatMapArgs)
	g.define(proto, "join", g.join)
	g.define(proto, "toLocaleString", func(call goja.FunctionCall) goja.Value { return g.joinWith(call.This, ",") })
	g.wrap(array, "from", g.argLength(0))
	g.wrap(object(object(global, "Function"), "prototype"), "apply", g.argLength(1))
	reflect := object(global, "Reflect")
	g.reflects = map[string]goja.Callable{}
	for _, name := range []string{"get", "has", "set", "defineProperty", "preventExtensions", "setPrototypeOf"} {
		g.reflects[name] = callable(reflect, name)
	}
	g.traps = g.lazyTraps()
	g.wrap(reflect, "apply", g.argLength(2))
	g.wrap(reflect, "construct", g.argLength(1))
	g.wrap(reflect, "ownKeys", g.stringArg(0))
	obj := object(global, "Object")
	for _, name := range []string{"keys", "values", "entries", "getOwnPropertyNames", "getOwnPropertyDescriptors"} {
		g.wrap(obj, name, g.stringArg(0))
	}
	g.wrap(obj, "defineProperty", g.flushArg)
	g.wrap(obj, "defineProperties", g.flushArg)
	g.wrap(reflect, "defineProperty", g.flushArg)

	g.wrap(object(object(global, "WeakMap"), "prototype"), "set", g.notIntrinsic)
	g.wrap(object(object(global, "WeakSet"), "prototype"), "add", g.notIntrinsic)
	symbol := object(global, "Symbol")
	g.keyFor = callable(symbol, "keyFor")
	g.define(symbol, "for", g.symbolFor)
	g.define(symbol, "keyFor", g.symbolKeyFor)

	str := object(global, "String")
	g.wrap(str, "raw", g.rawArgs)
	sproto := object(str, "prototype")
	g.wrap(sproto, "repeat", g.repeatArgs)
	g.wrap(sproto, "padStart", g.padArgs)
	g.wrap(sproto, "padEnd", g.padArgs)
	g.wrap(sproto, "split", g.splitArgs)
	g.wrap(sproto, "match", g.subject(-1))
	g.wrap(sproto, "replace", g.both(g.subject(-1), g.replaceArgs))
	g.wrap(sproto, "replaceAll", g.both(g.subject(-1), g.replaceArgs))
	g.wrapSymbol(sproto, goja.SymIterator, g.thisLength)
	rproto := object(object(global, "RegExp"), "prototype")
	g.wrapSymbol(rproto, goja.SymReplace, g.both(g.subject(0), g.replaceArgs))
	g.wrapSymbol(rproto, goja.SymMatch, g.subject(0))
	g.wrapSymbol(rproto, goja.SymSplit, g.subject(0))
}

// notIntrinsic refuses an object of the realm as the key of a WeakMap or
// WeakSet: goja attaches a cleanup to the key, which would outlive the
// call on an object that lives as long as the realm, one per WeakMap.
func (g *guards) notIntrinsic(call goja.FunctionCall) []goja.Value {
	if o, ok := call.Argument(0).(*goja.Object); ok && g.intrinsic != nil && g.intrinsic(o) {
		panic(g.r.NewTypeError("a builtin cannot be a weak key in a transformation"))
	}
	return call.Arguments
}

// symbolFor is Symbol.for with a registry per call: goja's registry would
// keep every key a call registers for the life of the realm, and show it
// to the next call.
func (g *guards) symbolFor(call goja.FunctionCall) goja.Value {
	g.alive()
	if _, ok := call.Argument(0).(*goja.Symbol); ok {
		panic(g.r.NewTypeError("Cannot convert a Symbol value to a string"))
	}
	key := call.Argument(0).String()
	if s, ok := g.symbols[key]; ok {
		return s
	}
	if g.symbols == nil {
		g.symbols = map[string]*goja.Symbol{}
	}
	s := goja.NewSymbol(key)
	g.symbols[key] = s
	return s
}

// symbolKeyFor is Symbol.keyFor on the call's registry.
func (g *guards) symbolKeyFor(call goja.FunctionCall) goja.Value {
	if s, ok := call.Argument(0).(*goja.Symbol); ok {
		for k, v := range g.symbols {
			if v == s {
				return g.r.ToValue(k)
			}
		}
	}
	v, err := g.keyFor(call.This, call.Arguments...)
	if err != nil {
		panic(err)
	}
	return v
}

// both runs a, then b on the arguments a returned.
func (g *guards) both(a, b hook) hook {
	return func(call goja.FunctionCall) []goja.Value {
		call.Arguments = a(call)
		return b(call)
	}
}

// subject refuses to search a string longer than the elements a builtin
// may make: match, split and replace make a result per match, all at once,
// and a match may be one character. i is the argument holding the string,
// -1 for this.
func (g *guards) subject(i int) hook {
	return func(call goja.FunctionCall) []goja.Value {
		s := call.This
		if i >= 0 {
			s = call.Argument(i)
		}
		if n := chars(s); n > float64(g.maxElems) {
			g.refuse(LimitMemory, "searching %.0f characters, which may make more than %d matches", n, g.maxElems)
		}
		return call.Arguments
	}
}

// noCodeFromStrings replaces the constructors of functions with one that
// throws, as browsers do under a Content-Security-Policy without
// unsafe-eval; Function stays a global for instanceof.
func (g *guards) noCodeFromStrings(global, protos *goja.Object) {
	refuse := func(goja.FunctionCall) goja.Value {
		panic(g.r.NewTypeError("code generation from strings is disabled"))
	}
	fn := object(global, "Function")
	fproto := object(fn, "prototype")
	stub := g.r.ToValue(refuse).(*goja.Object)
	must(stub.DefineDataProperty("prototype", fproto, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE))
	must(global.DefineDataProperty("Function", stub, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	must(fproto.DefineDataProperty("constructor", stub, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	for _, k := range protos.Keys() {
		p := object(protos, k)
		must(p.DefineDataProperty("constructor", g.r.ToValue(refuse), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE))
	}
}

// wrap replaces o[name] by a builtin that runs h, then the original.
func (g *guards) wrap(o *goja.Object, name string, h hook) {
	orig := callable(o, name)
	g.define(o, name, func(call goja.FunctionCall) goja.Value { return g.invoke(orig, call, h) })
}

func (g *guards) wrapSymbol(o *goja.Object, sym *goja.Symbol, h hook) {
	orig, ok := goja.AssertFunction(o.GetSymbol(sym))
	if !ok {
		panic(fmt.Sprintf("transform: %s is not a function", sym))
	}
	fn := g.r.ToValue(func(call goja.FunctionCall) goja.Value { return g.invoke(orig, call, h) })
	must(o.DefineDataPropertySymbol(sym, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
}

// invoke runs a guarded builtin. What the original throws, or the
// interrupt that stopped it, goes on up as it came.
func (g *guards) invoke(orig goja.Callable, call goja.FunctionCall, h hook) goja.Value {
	g.alive()
	v, err := orig(call.This, h(call)...)
	if err != nil {
		panic(err)
	}
	return v
}

func (g *guards) define(o *goja.Object, name string, f func(goja.FunctionCall) goja.Value) {
	must(o.DefineDataProperty(name, g.r.ToValue(f), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE))
}

// alive throws when the call was stopped. The interrupt reaches the
// script's own code only; a builtin looping over a callback (replace,
// flatMap, join, JSON.stringify) goes on calling it, and this is where such
// a loop learns that the call is over.
func (g *guards) alive() {
	if err := g.c.cause(); err != nil {
		panic(g.r.NewGoError(err))
	}
}

// refuse stops the call at a limit: the exception unwinds the builtins
// between here and the script, the interrupt keeps the script from
// catching it.
func (g *guards) refuse(limit, format string, args ...any) {
	err := &LimitError{Limit: limit, Detail: fmt.Sprintf(format, args...)}
	g.c.stop(err)
	panic(g.r.NewGoError(err))
}

// lengthOf is v's length, refused when it is more elements than a builtin
// may take.
func (g *guards) lengthOf(v goja.Value) int64 {
	if !defined(v) {
		return 0
	}
	n := v.ToObject(g.r).Get("length")
	if !defined(n) {
		return 0
	}
	l := n.ToInteger()
	if l > g.maxElems {
		g.refuse(LimitMemory, "a builtin given %d elements; at most %d", l, g.maxElems)
	}
	return l
}

func (g *guards) thisLength(call goja.FunctionCall) []goja.Value {
	g.lengthOf(call.This)
	return call.Arguments
}

func (g *guards) argLength(i int) hook {
	return func(call goja.FunctionCall) []goja.Value {
		if _, ok := call.Argument(i).(*goja.Object); ok {
			g.lengthOf(call.Argument(i))
		}
		return call.Arguments
	}
}

// stringArg refuses to list the keys of a string longer than the elements
// a builtin may make (one key per character).
func (g *guards) stringArg(i int) hook {
	return func(call goja.FunctionCall) []goja.Value {
		if v := call.Argument(i); isString(v) {
			g.lengthOf(v)
		}
		return call.Arguments
	}
}

func isString(v goja.Value) bool {
	if _, ok := v.(goja.String); ok {
		return true
	}
	o, ok := v.(*goja.Object)
	return ok && o.ClassName() == "String"
}

func (g *guards) concatArgs(call goja.FunctionCall) []goja.Value {
	n := g.lengthOf(call.This)
	for _, a := range call.Arguments {
		if o, ok := a.(*goja.Object); ok && (o.ClassName() == "Array" || defined(o.GetSymbol(goja.SymIsConcatSpreadable))) {
			n += g.lengthOf(o)
		}
	}
	if n > g.maxElems {
		g.refuse(LimitMemory, "concat would make %d elements; at most %d", n, g.maxElems)
	}
	return call.Arguments
}

// flatArgs walks what flat will, to its depth: the elements of every
// nested array count, and an array holding itself is deeper than
// maxNesting.
func (g *guards) flatArgs(call goja.FunctionCall) []goja.Value {
	depth := 1.0
	if d := call.Argument(0); !goja.IsUndefined(d) {
		depth = d.ToFloat()
	}
	var total int64
	var walk func(v goja.Value, depth float64, level int)
	walk = func(v goja.Value, depth float64, level int) {
		g.alive()
		if level > maxNesting {
			g.refuse(LimitCallStack, "flat nested deeper than %d", maxNesting)
		}
		n := g.lengthOf(v)
		if total += n; total > g.maxElems {
			g.refuse(LimitMemory, "flat would take %d elements; at most %d", total, g.maxElems)
		}
		if depth < 1 {
			return
		}
		o := v.ToObject(g.r)
		for i := int64(0); i < n; i++ {
			if e, ok := o.Get(strconv.FormatInt(i, 10)).(*goja.Object); ok && e.ClassName() == "Array" {
				walk(e, depth-1, level+1)
			}
		}
	}
	walk(call.This, depth, 0)
	return call.Arguments
}

// flatMapArgs counts the elements of the arrays the callback returns,
// which flatMap copies.
func (g *guards) flatMapArgs(call goja.FunctionCall) []goja.Value {
	total := g.lengthOf(call.This)
	fn, ok := goja.AssertFunction(call.Argument(0))
	if !ok {
		return call.Arguments
	}
	args := append([]goja.Value{g.r.ToValue(func(c goja.FunctionCall) goja.Value {
		g.alive()
		v, err := fn(c.This, c.Arguments...)
		if err != nil {
			panic(err)
		}
		if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
			if total += g.lengthOf(o); total > g.maxElems {
				g.refuse(LimitMemory, "flatMap would make %d elements; at most %d", total, g.maxElems)
			}
		}
		return v
	})}, call.Arguments[1:]...)
	return args
}

func (g *guards) join(call goja.FunctionCall) goja.Value {
	sep := ","
	if s := call.Argument(0); !goja.IsUndefined(s) {
		sep = s.String()
	}
	return g.joinWith(call.This, sep)
}

// joinWith is Array.prototype.join counting what it makes. An array met
// again while it is being joined is empty, as in V8 and goja.
func (g *guards) joinWith(this goja.Value, sep string) goja.Value {
	o := this.ToObject(g.r)
	for _, j := range g.joining {
		if j == o {
			return g.r.ToValue("")
		}
	}
	if len(g.joining) >= maxNesting {
		g.refuse(LimitCallStack, "join nested deeper than %d", maxNesting)
	}
	g.joining = append(g.joining, o)
	defer func() { g.joining = g.joining[:len(g.joining)-1] }()
	n := g.lengthOf(o)
	if n > 1 && int64(len(sep))*(n-1) > g.maxChars {
		g.refuse(LimitMemory, "join would make more than %d characters", g.maxChars)
	}
	var b strings.Builder
	for i := int64(0); i < n; i++ {
		g.alive()
		if i > 0 {
			b.WriteString(sep)
		}
		if e := o.Get(strconv.FormatInt(i, 10)); defined(e) {
			b.WriteString(e.String())
		}
		if int64(b.Len()) > g.maxChars {
			g.refuse(LimitMemory, "join would make more than %d characters", g.maxChars)
		}
	}
	return g.r.ToValue(b.String())
}

// chars is the length of v as a string.
func chars(v goja.Value) float64 {
	if s, ok := v.ToString().(goja.String); ok {
		return float64(s.Length())
	}
	return 0
}

func (g *guards) repeatArgs(call goja.FunctionCall) []goja.Value {
	if n := chars(call.This) * call.Argument(0).ToFloat(); n > float64(g.maxChars) {
		g.refuse(LimitMemory, "repeat would make %.0f characters; at most %d", n, g.maxChars)
	}
	return call.Arguments
}

func (g *guards) padArgs(call goja.FunctionCall) []goja.Value {
	if n := call.Argument(0).ToFloat(); n > float64(g.maxChars) {
		g.refuse(LimitMemory, "padding to %.0f characters; at most %d", n, g.maxChars)
	}
	return call.Arguments
}

// splitArgs is subject, unless the split's own limit is lower.
func (g *guards) splitArgs(call goja.FunctionCall) []goja.Value {
	if limit := call.Argument(1); !goja.IsUndefined(limit) && limit.ToFloat() <= float64(g.maxElems) {
		return call.Arguments
	}
	return g.subject(-1)(call)
}

func (g *guards) rawArgs(call goja.FunctionCall) []goja.Value {
	if o, ok := call.Argument(0).(*goja.Object); ok {
		g.lengthOf(o.Get("raw"))
	}
	return call.Arguments
}

// replaceArgs makes the replacement (argument 1, of String.prototype.replace,
// replaceAll and RegExp.prototype[Symbol.replace]) a function that counts
// what it returns: a function stays itself, a string is substituted ($&,
// $1, $<name>...) by the counting function.
func (g *guards) replaceArgs(call goja.FunctionCall) []goja.Value {
	if len(call.Arguments) < 2 {
		return call.Arguments
	}
	repl := call.Arguments[1]
	fn, isFn := goja.AssertFunction(repl)
	tmpl := ""
	if !isFn {
		tmpl = repl.String()
	}
	var total float64
	count := func(c goja.FunctionCall) goja.Value {
		g.alive()
		var v goja.Value
		if isFn {
			r, err := fn(c.This, c.Arguments...)
			if err != nil {
				panic(err)
			}
			v = r.ToString()
		} else {
			v = g.r.ToValue(substitute(tmpl, c.Arguments))
		}
		if total += chars(v); total > float64(g.maxChars) {
			g.refuse(LimitMemory, "replace would make more than %d characters", g.maxChars)
		}
		return v
	}
	args := append([]goja.Value{}, call.Arguments...)
	args[1] = g.r.ToValue(count)
	return args
}

// substitute is GetSubstitution (ECMA-262 22.1.3.19.1) on the arguments a
// replacement function receives: the match, the captures, the position,
// the string and, with named groups, the groups.
func substitute(tmpl string, args []goja.Value) string {
	if !strings.Contains(tmpl, "$") {
		return tmpl
	}
	var groups *goja.Object
	if o, ok := args[len(args)-1].(*goja.Object); ok {
		groups, args = o, args[:len(args)-1]
	}
	matched := args[0].ToString().(goja.String)
	str := args[len(args)-1].ToString().(goja.String)
	pos := int(args[len(args)-2].ToInteger())
	captures := args[1 : len(args)-2]
	capture := func(i int) string {
		if c := captures[i-1]; defined(c) {
			return c.String()
		}
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' || i+1 == len(tmpl) {
			b.WriteByte(tmpl[i])
			continue
		}
		switch c := tmpl[i+1]; {
		case c == '$':
			b.WriteByte('$')
			i++
		case c == '&':
			b.WriteString(matched.String())
			i++
		case c == '`':
			b.WriteString(str.Substring(0, pos).String())
			i++
		case c == '\'':
			if end := pos + matched.Length(); end < str.Length() {
				b.WriteString(str.Substring(end, str.Length()).String())
			}
			i++
		case c >= '0' && c <= '9':
			n, width := captureIndex(tmpl[i+1:], len(captures))
			if n == 0 {
				b.WriteByte('$')
				continue
			}
			b.WriteString(capture(n))
			i += width
		case c == '<' && groups != nil:
			end := strings.IndexByte(tmpl[i:], '>')
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			if v := groups.Get(tmpl[i+2 : i+end]); defined(v) {
				b.WriteString(v.String())
			}
			i += end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// captureIndex reads $n or $nn after the "$": the two-digit capture when
// there is one, else the one-digit one, else 0 (the "$" is literal).
func captureIndex(s string, m int) (n, width int) {
	if len(s) >= 2 && s[1] >= '0' && s[1] <= '9' {
		if nn := int(s[0]-'0')*10 + int(s[1]-'0'); nn >= 1 && nn <= m {
			return nn, 2
		}
	}
	if d := int(s[0] - '0'); d >= 1 && d <= m {
		return d, 1
	}
	return 0, 0
}

func (g *guards) parseArgs(call goja.FunctionCall) []goja.Value {
	if s, ok := call.Argument(0).(goja.String); ok {
		g.checkNesting(s.String())
	}
	return call.Arguments
}

// checkNesting refuses JSON nested deeper than maxNesting, which goja's
// parser would recurse through.
func (g *guards) checkNesting(s string) {
	if jsondepth.Of(s) > maxNesting {
		g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
	}
}

// parseJSON parses the event's data with the original JSON.parse.
func (g *guards) parseJSON(s string) goja.Value {
	g.checkNesting(s)
	v, err := g.parse(goja.Undefined(), g.r.ToValue(s))
	if err != nil {
		panic(err)
	}
	return v
}

// stringifyArgs makes the script's JSON.stringify count what it encodes,
// through a replacer that wraps the script's own.
func (g *guards) stringifyArgs(call goja.FunctionCall) []goja.Value {
	k := g.newCounter(g.maxChars, LimitMemory)
	k.indent = indentOf(call.Argument(2))
	switch r := call.Argument(1).(type) {
	case *goja.Object:
		if fn, ok := goja.AssertFunction(r); ok {
			k.user = fn
		} else if r.ClassName() == "Array" {
			k.allow = map[string]bool{}
			for i, n := int64(0), g.lengthOf(r); i < n; i++ {
				k.allow[r.Get(strconv.FormatInt(i, 10)).String()] = true
			}
		}
	}
	args := []goja.Value{call.Argument(0), g.r.ToValue(k.replacer), call.Argument(2)}
	return args
}

// indentOf is the width of JSON.stringify's space argument, at most 10.
func indentOf(v goja.Value) int64 {
	if s, ok := v.(goja.String); ok {
		return int64(min(s.Length(), 10))
	}
	if defined(v) {
		if _, ok := v.(*goja.Object); !ok {
			return max(0, min(v.ToInteger(), 10))
		}
	}
	return 0
}

// counter is a JSON.stringify replacer that counts what is encoded (at
// least; a string with characters to escape counts once each) and stops
// the call past budget: stringify calls it once for every value.
type counter struct {
	g      *guards
	budget int64
	limit  string
	n      int64
	indent int64
	depth  map[*goja.Object]int
	user   goja.Callable
	allow  map[string]bool
	root   bool
}

func (g *guards) newCounter(budget int64, limit string) *counter {
	return &counter{g: g, budget: budget, limit: limit, depth: map[*goja.Object]int{}, root: true}
}

func (k *counter) replacer(call goja.FunctionCall) goja.Value {
	k.g.alive()
	holder, _ := call.This.(*goja.Object)
	key := call.Argument(0).String()
	v := call.Argument(1)
	root := k.root
	k.root = false
	inArray := holder != nil && holder.ClassName() == "Array"
	if k.allow != nil && !root && !inArray && !k.allow[key] {
		return goja.Undefined()
	}
	if k.user != nil {
		var err error
		if v, err = k.user(call.This, call.Arguments...); err != nil {
			panic(err)
		}
	}
	d := k.depth[holder]
	k.n += 1 + k.indent*int64(d)
	if !inArray {
		k.n += int64(len(key)) + 3
	}
	switch x := v.(type) {
	case *goja.Object:
		if d+1 > maxNesting {
			k.g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
		}
		k.depth[x] = d + 1
		k.n += 2
	case goja.String:
		k.n += int64(x.Length()) + 2
	default:
		if defined(v) {
			k.n += int64(len(v.String()))
		}
	}
	if k.n > k.budget {
		k.g.refuse(k.limit, "JSON of more than %d bytes", k.budget)
	}
	return v
}

func object(o *goja.Object, name string) *goja.Object {
	v, ok := o.Get(name).(*goja.Object)
	if !ok {
		panic(fmt.Sprintf("transform: %s is not an object", name))
	}
	return v
}

func callable(o *goja.Object, name string) goja.Callable {
	fn, ok := goja.AssertFunction(o.Get(name))
	if !ok {
		panic(fmt.Sprintf("transform: %s is not a function", name))
	}
	return fn
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
