package transform

import (
	"math"
	"slices"
	"strconv"

	"github.com/dop251/goja"
)

// A lazy is an object of the event's data decoded only as far as the
// script reads it: a proxy, whose traps are Go, in front of an empty
// ordinary object (its target). Building every object of a kilobyte of
// data costs goja more than the rest of a call, and most scripts read a
// field or two, or none. The proxy behaves as the object JSON.parse makes:
// its own properties are the object's members, writable, enumerable and
// configurable, in the order of an ordinary object (array indices first,
// ascending, then the others as they came), its prototype is
// Object.prototype, and it can be changed as any object can.
//
// The traps answer from the members (entries) while they stay plain data
// properties of an extensible object with its first prototype. Anything
// else (an accessor, a property that is not writable, enumerable and
// configurable, a symbol key, a new prototype, freezing, a setter found on
// the prototype chain) first copies every member to the target and clears
// the traps (flush): from then on the proxy forwards everything to the
// target, which goja does itself, and the target is what JSON.parse would
// have made, changed as the script changed it.
//
// Reading a member decodes it: a string, number, boolean or null as itself,
// an object as another lazy, an array as an array (of lazies). When the
// body is encoded (encoder.lazy), a member the script did not change is
// written as the producer's bytes, and an object it never read as a
// whole: what the script did not touch keeps its bytes, as an
// untransformed delivery does.
type lazy struct {
	g *guards
	// raw is the object's JSON, valid, from '{' to '}', in the data doc
	// (whose objects and arrays are spans).
	raw   []byte
	doc   decoder
	depth int
	// entries are the members, decoded from raw on the first trap that
	// needs them (scanned).
	entries []entry
	scanned bool
	// index finds a member of a large object; nil until needed, and after
	// a member is removed.
	index map[string]int
	// flushed: the traps are cleared, the target holds the members.
	flushed bool
	target  *goja.Object
	proxy   *goja.Object
	traps   goja.ProxyTrapConfig
}

// entry is a member: its key, its JSON (nil when the script added it) at
// offset at of the data, and its value once decoded or assigned. set says
// the script assigned it.
type entry struct {
	key string
	raw []byte
	at  int
	v   goja.Value
	set bool
}

// indexFrom is the number of members past which a lazy finds them
// through a map.
const indexFrom = 32

// newLazy makes the lazy of the object at d.i, at nesting depth, and
// moves d past it.
func (g *guards) newLazy(d *decoder, depth int) *goja.Object {
	if depth > maxNesting {
		g.refuse(LimitCallStack, "JSON nested deeper than %d", maxNesting)
	}
	start := d.i
	d.skip()
	l := &lazy{g: g, raw: d.b[start:d.i], doc: decoder{g: g, b: d.b, spans: d.spans, i: start}, depth: depth,
		target: g.r.NewObject(), traps: g.traps}
	l.proxy = g.r.ToValue(g.r.NewProxy(l.target, &l.traps)).(*goja.Object)
	if g.lazies == nil {
		g.lazies = map[*goja.Object]*lazy{}
	}
	g.lazies[l.proxy], g.lazies[l.target] = l, l
	return l.proxy
}

// lazyTraps are the traps of every lazy of a realm, which find their lazy
// by its target: made once, copied into each lazy, rather than eleven
// closures a lazy.
func (g *guards) lazyTraps() goja.ProxyTrapConfig {
	of := func(t *goja.Object) *lazy { return g.lazies[t] }
	return goja.ProxyTrapConfig{
		Get:                      func(t *goja.Object, k string, rc goja.Value) goja.Value { return of(t).get(t, k, rc) },
		Has:                      func(t *goja.Object, k string) bool { return of(t).has(t, k) },
		Set:                      func(t *goja.Object, k string, v, rc goja.Value) bool { return of(t).set(t, k, v, rc) },
		DeleteProperty:           func(t *goja.Object, k string) bool { return of(t).deleteProperty(k) },
		OwnKeys:                  func(t *goja.Object) *goja.Object { return of(t).ownKeys() },
		GetOwnPropertyDescriptor: func(t *goja.Object, k string) goja.PropertyDescriptor { return of(t).ownProperty(k) },
		DefineProperty: func(t *goja.Object, k string, d goja.PropertyDescriptor) bool {
			return of(t).defineProperty(t, k, d)
		},
		SetSym: func(t *goja.Object, s *goja.Symbol, v, rc goja.Value) bool { return of(t).setSym(t, s, v, rc) },
		DefinePropertySym: func(t *goja.Object, s *goja.Symbol, d goja.PropertyDescriptor) bool {
			return of(t).definePropertySym(t, s, d)
		},
		PreventExtensions: func(t *goja.Object) bool { return of(t).preventExtensions(t) },
		SetPrototypeOf:    func(t *goja.Object, p *goja.Object) bool { return of(t).setPrototypeOf(t, p) },
	}
}

// lazyOf is the lazy o is, or nil.
func (g *guards) lazyOf(o *goja.Object) *lazy {
	if g.lazies == nil {
		return nil
	}
	return g.lazies[o]
}

// scan reads the members of raw: keys decoded, values as their bytes. A
// key named twice keeps its first place and its last value, as in
// JSON.parse.
func (l *lazy) scan() {
	if l.scanned {
		return
	}
	l.scanned = true
	d := l.doc
	d.i++ // '{'
	d.space()
	if d.b[d.i] == '}' {
		return
	}
	indices := false
	l.entries = make([]entry, 0, 8)
	for {
		d.space()
		k := d.string()
		d.space()
		d.i++ // ':'
		d.space()
		start := d.i
		d.skip()
		raw := d.b[start:d.i]
		if i := l.find(k); i >= 0 {
			l.entries[i].raw, l.entries[i].at = raw, start
		} else {
			l.entries = append(l.entries, entry{key: k, raw: raw, at: start})
			if l.index != nil {
				l.index[k] = len(l.entries) - 1
			}
			indices = indices || arrayIndex(k) >= 0
		}
		d.space()
		if d.b[d.i] == '}' {
			break
		}
		d.i++ // ','
	}
	if indices {
		slices.SortStableFunc(l.entries, func(a, b entry) int { return compareKeys(a.key, b.key) })
		l.index = nil
	}
}

// compareKeys orders keys as an ordinary object lists them: array
// indices first, ascending, then the rest in the order they came.
func compareKeys(a, b string) int {
	i, j := arrayIndex(a), arrayIndex(b)
	switch {
	case i >= 0 && j >= 0:
		return int(i - j)
	case i >= 0:
		return -1
	case j >= 0:
		return 1
	}
	return 0
}

// arrayIndex is k as an array index (a canonical integer below 2^32-1),
// or -1.
func arrayIndex(k string) int64 {
	if k == "" || k[0] < '0' || k[0] > '9' || len(k) > 10 || (k[0] == '0' && len(k) > 1) {
		return -1
	}
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n == math.MaxUint32 {
		return -1
	}
	return int64(n)
}

// find is the position of the member k, or -1.
func (l *lazy) find(k string) int {
	if len(l.entries) <= indexFrom {
		for i := range l.entries {
			if l.entries[i].key == k {
				return i
			}
		}
		return -1
	}
	if l.index == nil {
		l.index = make(map[string]int, len(l.entries))
		for i, e := range l.entries {
			l.index[e.key] = i
		}
	}
	if i, ok := l.index[k]; ok {
		return i
	}
	return -1
}

// member is the position of the member k, scanning raw first, or -1.
func (l *lazy) member(k string) int {
	l.scan()
	return l.find(k)
}

// value is the member at i, decoded on its first read.
func (l *lazy) value(i int) goja.Value {
	e := &l.entries[i]
	if e.v == nil {
		d := l.doc
		d.i = e.at
		e.v = d.value(l.depth)
	}
	return e.v
}

// put assigns the member k, adding it in its place when it is new.
func (l *lazy) put(k string, v goja.Value) {
	if i := l.member(k); i >= 0 {
		l.entries[i].v, l.entries[i].set = v, true
		return
	}
	e := entry{key: k, v: v, set: true}
	at := len(l.entries)
	if arrayIndex(k) >= 0 {
		at, _ = slices.BinarySearchFunc(l.entries, e, func(a, b entry) int {
			if c := compareKeys(a.key, b.key); c != 0 {
				return c
			}
			return -1
		})
	}
	l.entries = slices.Insert(l.entries, at, e)
	if l.index != nil && at == len(l.entries)-1 {
		l.index[k] = at
	} else {
		l.index = nil
	}
}

// flush copies the members to the target, in order, and clears the
// traps: goja then forwards every operation to the target.
func (l *lazy) flush() {
	l.scan()
	for i := range l.entries {
		must(l.target.DefineDataProperty(l.entries[i].key, l.value(i), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE))
	}
	l.flushed = true
	l.traps = goja.ProxyTrapConfig{}
}

func (l *lazy) get(t *goja.Object, k string, receiver goja.Value) goja.Value {
	if i := l.member(k); i >= 0 {
		return l.value(i)
	}
	return l.g.reflect("get", t, l.g.r.ToValue(k), receiver)
}

func (l *lazy) has(t *goja.Object, k string) bool {
	return l.member(k) >= 0 || l.g.reflect("has", t, l.g.r.ToValue(k)).ToBoolean()
}

// set assigns a member of the proxy itself; one its prototype chain has
// (a setter, __proto__, a method of Object.prototype) is assigned as
// JavaScript does, on the flushed target.
func (l *lazy) set(t *goja.Object, k string, v, receiver goja.Value) bool {
	key := l.g.r.ToValue(k)
	if receiver == l.proxy && (l.member(k) >= 0 || !l.g.reflect("has", t, key).ToBoolean()) {
		l.put(k, v)
		return true
	}
	l.flush()
	return l.g.reflect("set", t, key, v, receiver).ToBoolean()
}

func (l *lazy) deleteProperty(k string) bool {
	if i := l.member(k); i >= 0 {
		l.entries = slices.Delete(l.entries, i, i+1)
		l.index = nil
	}
	return true
}

func (l *lazy) ownKeys() *goja.Object {
	l.scan()
	keys := make([]any, len(l.entries))
	for i, e := range l.entries {
		keys[i] = e.key
	}
	return l.g.r.NewArray(keys...)
}

func (l *lazy) ownProperty(k string) goja.PropertyDescriptor {
	i := l.member(k)
	if i < 0 {
		return goja.PropertyDescriptor{}
	}
	return goja.PropertyDescriptor{Value: l.value(i), Writable: goja.FLAG_TRUE, Enumerable: goja.FLAG_TRUE, Configurable: goja.FLAG_TRUE}
}

// defineProperty defines a plain data property as a member; anything
// else on the flushed target.
func (l *lazy) defineProperty(t *goja.Object, k string, d goja.PropertyDescriptor) bool {
	own := l.member(k) >= 0
	plain := func(f goja.Flag) bool { return f == goja.FLAG_TRUE || (f == goja.FLAG_NOT_SET && own) }
	if d.Getter == nil && d.Setter == nil && d.Value != nil && plain(d.Writable) && plain(d.Enumerable) && plain(d.Configurable) {
		l.put(k, d.Value)
		return true
	}
	l.flush()
	return l.g.reflect("defineProperty", t, l.g.r.ToValue(k), l.g.descriptor(d)).ToBoolean()
}

func (l *lazy) setSym(t *goja.Object, s *goja.Symbol, v, receiver goja.Value) bool {
	l.flush()
	return l.g.reflect("set", t, s, v, receiver).ToBoolean()
}

func (l *lazy) definePropertySym(t *goja.Object, s *goja.Symbol, d goja.PropertyDescriptor) bool {
	l.flush()
	return l.g.reflect("defineProperty", t, s, l.g.descriptor(d)).ToBoolean()
}

func (l *lazy) preventExtensions(t *goja.Object) bool {
	l.flush()
	return l.g.reflect("preventExtensions", t).ToBoolean()
}

func (l *lazy) setPrototypeOf(t *goja.Object, proto *goja.Object) bool {
	l.flush()
	p := goja.Null()
	if proto != nil {
		p = proto
	}
	return l.g.reflect("setPrototypeOf", t, p).ToBoolean()
}

// flushArg flushes the lazy that Object.defineProperty,
// Object.defineProperties or Reflect.defineProperty is about to define a
// property on, so that goja defines it on the target: goja's check of
// what a proxy's defineProperty trap did refuses a non-configurable
// accessor that was defined as asked (__isCompatibleDescriptor tests its
// getter and setter the wrong way round).
func (g *guards) flushArg(call goja.FunctionCall) []goja.Value {
	if o, ok := call.Argument(0).(*goja.Object); ok {
		if l := g.lazyOf(o); l != nil && !l.flushed && l.proxy == o {
			l.flush()
		}
	}
	return call.Arguments
}

// reflect calls the original Reflect[name]: what it throws unwinds the
// trap as the script's exception.
func (g *guards) reflect(name string, args ...goja.Value) goja.Value {
	v, err := g.reflects[name](goja.Undefined(), args...)
	if err != nil {
		panic(err)
	}
	return v
}

// descriptor is d as the object Reflect.defineProperty takes.
func (g *guards) descriptor(d goja.PropertyDescriptor) *goja.Object {
	o := g.r.NewObject()
	flag := func(name string, f goja.Flag) {
		if f != goja.FLAG_NOT_SET {
			must(o.Set(name, f.Bool()))
		}
	}
	if d.Value != nil {
		must(o.Set("value", d.Value))
	}
	if d.Getter != nil {
		must(o.Set("get", d.Getter))
	}
	if d.Setter != nil {
		must(o.Set("set", d.Setter))
	}
	flag("writable", d.Writable)
	flag("enumerable", d.Enumerable)
	flag("configurable", d.Configurable)
	return o
}
