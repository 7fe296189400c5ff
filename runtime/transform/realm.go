package transform

import (
	"context"
	"fmt"
	"runtime"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
)

// A realm is a goja runtime prepared once and reused by calls, one at a
// time, of any script, as SES's lockdown prepares a JavaScript realm: its
// builtins are guarded (guards.go), then every object reachable from the
// global object and from the intrinsics a script can reach otherwise
// (iterator and generator prototypes, %ThrowTypeError%) is frozen, the
// global object itself included. A script is compiled as the body of a
// strict-mode function (wrap), which each call runs anew, so what the
// script's top level declares belongs to the call. A call can then change
// nothing that outlives it:
//
//   - no global: the global object is frozen and strict mode makes an
//     assignment to an undeclared name throw;
//   - no builtin or prototype (Object.prototype.x = 1, JSON.parse = f,
//     Object.freeze(Object.prototype)): all frozen, an assignment throws;
//   - no closure: the function that made the handler is made per call;
//   - nothing kept by the engine for the realm's life: Symbol.for has a
//     registry per call, and an intrinsic cannot be a WeakMap or WeakSet
//     key (goja attaches a cleanup to the key, which would outlive the
//     call, one per map: a leak a loop makes large).
//
// So realms are shared by every script in the process, whoever's it is:
// a prepared realm holds about half a megabyte and takes milliseconds to
// make, too much to keep one per script (the deliverer keeps up to a
// thousand). A call that went over a limit, was stopped or failed inside
// the engine may have left the runtime in the middle of a builtin; its
// realm is dropped, never reused.
type realm struct {
	rt *goja.Runtime
	g  *guards
	// global is the global object, the top level's this.
	global *goja.Object
	// scripts are the functions that run a script's top level and return
	// its handler, by script, made in this runtime on its first call here.
	scripts map[*Script]goja.Callable
	// freezeScript freezes such a function.
	freezeScript goja.Callable
	// tryFn calls tried, as a builtin: see call.try.
	tryFn goja.Callable
	tried func()
	// calls go to the realm's goroutine (serve), which answers on done.
	// Its stack, grown once to what goja needs, serves every call.
	calls   chan *call
	done    chan result
	cleanup runtime.Cleanup
	// ended is closed when the goroutine has returned.
	ended chan struct{}
}

// serve runs the calls of a realm until it is closed. It holds the
// channels, not the realm, so that a realm no one holds any more is collected
// and its cleanup closes calls.
func serve(calls <-chan *call, done chan<- result, ended chan<- struct{}) {
	defer close(ended)
	for c := range calls {
		c.run(done)
	}
}

// close ends the realm's goroutine once it has finished its call.
func (rm *realm) close() {
	rm.cleanup.Stop()
	close(rm.calls)
}

// prefix and suffix make the script the body of a strict-mode function
// that returns its handler. The prefix adds no line, so a position in the
// script keeps its line (and, past the first line, its column).
const (
	prefix = `(function () { "use strict"; `
	suffix = "\n;return handler })"
)

func wrap(src string) string { return prefix + src + suffix }

// wrapped returns the statements of the script inside the function wrap
// made, or false when the script closed that function to run code of its
// own outside it (`}); var x; (function () {`): the program must be that
// one function and nothing else.
func wrapped(file *ast.Program) ([]ast.Statement, bool) {
	if len(file.Body) != 1 {
		return nil, false
	}
	st, ok := file.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return nil, false
	}
	fn, ok := st.Expression.(*ast.FunctionLiteral)
	if !ok || fn.Async || fn.Generator || fn.Name != nil || len(fn.ParameterList.List) != 0 || int(fn.Function) != 2 {
		return nil, false
	}
	return fn.Body.List, true
}

// lockdown makes the function that prepares a runtime once its guards are
// installed: it lets the methods scripts commonly shadow by assignment
// stay assignable on the objects inheriting them (tame), then freezes
// everything reachable (harden). It captures the builtins it uses before
// the guards replace them.
var lockdown = goja.MustCompile("lockdown.js", `(function () {
	"use strict";
	const freeze = Object.freeze, getProto = Object.getPrototypeOf, ownKeys = Reflect.ownKeys;
	const getDesc = Object.getOwnPropertyDescriptor, define = Object.defineProperty;

	// tame turns proto[name], a data property, into an accessor whose setter
	// defines the property on the object assigned to, so that
	// "o.toString = f" or "err.name = 'E'" still works once proto is frozen
	// (SES's "override mistake").
	function tame(proto, name) {
		const d = getDesc(proto, name);
		if (d === undefined || !("value" in d) || !d.writable) {
			return;
		}
		const value = d.value;
		define(proto, name, {
			get: function () { return value; },
			set: function (v) {
				if (this === proto) {
					throw new TypeError("Cannot assign to read only property '" + String(name) + "' of a builtin");
				}
				define(this, name, {value: v, writable: true, enumerable: true, configurable: true});
			},
			enumerable: d.enumerable,
			configurable: false,
		});
	}

	// harden freezes root and everything reachable from it: properties,
	// getters and setters, prototypes.
	const seen = new Set();
	function harden(root) {
		const todo = [root];
		let n = 1;
		while (n > 0) {
			const o = todo[--n];
			if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) {
				continue;
			}
			seen.add(o);
			freeze(o);
			todo[n++] = getProto(o);
			const keys = ownKeys(o);
			for (let i = 0; i < keys.length; i++) {
				const d = getDesc(o, keys[i]);
				if ("value" in d) {
					todo[n++] = d.value;
				} else {
					todo[n++] = d.get;
					todo[n++] = d.set;
				}
			}
		}
	}

	// prepare tames, then freezes everything reachable from the global
	// object and the intrinsics no global leads to. It returns whether an
	// object is one of them, and what freezes the function wrap makes of a
	// script (its prototype is Function.prototype, already frozen).
	return function (tamed, errors) {
		for (let i = 0; i < tamed.length; i++) {
			const proto = tamed[i][0], names = tamed[i][1];
			for (let j = 0; j < names.length; j++) {
				tame(proto, names[j]);
			}
		}
		const names = ["constructor", "name", "message", "toString"];
		for (let i = 0; i < errors.length; i++) {
			for (let j = 0; j < names.length; j++) {
				tame(errors[i].prototype, names[j]);
			}
		}
		harden(globalThis);
		harden(getProto(function* () {}));
		harden(getProto(async function () {}));
		harden(getProto([][Symbol.iterator]()));
		harden(getProto(""[Symbol.iterator]()));
		harden(getProto(new Map()[Symbol.iterator]()));
		harden(getProto(new Set()[Symbol.iterator]()));
		harden(getProto(/x/[Symbol.matchAll]("")));
		harden(getDesc(arguments, "callee").get);
		return [
			function (o) { return seen.has(o); },
			function (script) { freeze(script); freeze(script.prototype); },
		];
	};
})()`, true)

// tamed are the properties of Object.prototype and Function.prototype
// that stay assignable on objects inheriting them (tame in lockdown);
// every Error prototype's constructor, name, message and toString are too.
var tamed = map[string][]string{
	"Object": {"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty",
		"isPrototypeOf", "propertyIsEnumerable"},
	"Function": {"toString"},
}

var errorTypes = []string{"Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError",
	"TypeError", "URIError", "AggregateError"}

// freezing is false only in the test showing that, without it, a call
// changes what the next one sees.
var freezing = true

// realms are the process's prepared realms: at most maxRealms, made as
// calls need them and kept for the life of the process, idle holding
// those not running a call. A call that finds none idle makes one while
// there are fewer than maxRealms (a slot), else waits for one: on a busy
// deliverer, calls on many goroutines at once each hold a realm until
// their call ends, and a pool the garbage collector emptied had them
// prepare dozens again after every collection, at milliseconds each, more
// CPU than the calls themselves; running more calls at once than a few
// per CPU gains nothing.
var realms = struct {
	idle  chan *realm
	slots chan struct{}
}{idle: make(chan *realm, maxRealms), slots: make(chan struct{}, maxRealms)}

// maxRealms bounds the realms of the process, about half a megabyte each.
var maxRealms = 8 * runtime.GOMAXPROCS(0)

// getRealm is an idle realm, a new one, or, when there are maxRealms, the
// first to be idle. It fails when ctx ends first, or when a realm cannot
// be prepared.
func getRealm(ctx context.Context) (*realm, error) {
	select {
	case rm := <-realms.idle:
		return rm, nil
	default:
	}
	select {
	case rm := <-realms.idle:
		return rm, nil
	case realms.slots <- struct{}{}:
		rm, err := newRealm()
		if err != nil {
			<-realms.slots
		}
		return rm, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// putRealm keeps a realm for a later call; dropRealm frees the slot of
// one closed.
func putRealm(rm *realm) { realms.idle <- rm }

func dropRealm() { <-realms.slots }

// maxScripts bounds the scripts' functions a realm keeps; past it, it
// starts over.
const maxScripts = 256

// newRealm prepares a runtime: guards, lockdown. It fails only on a bug of
// this package or of goja.
func newRealm() (_ *realm, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("%w: the engine failed: preparing a runtime: %v", ErrFailed, x)
		}
	}()
	rt := goja.New()
	rm := &realm{rt: rt, global: rt.GlobalObject(), scripts: map[*Script]goja.Callable{}}
	tryFn, ok := goja.AssertFunction(rt.ToValue(func(goja.FunctionCall) goja.Value {
		rm.tried()
		return goja.Undefined()
	}))
	if !ok {
		return nil, fmt.Errorf("%w: the engine failed: a builtin is not a function", ErrFailed)
	}
	rm.tryFn = tryFn
	prepared := &call{s: &Script{limits: DefaultLimits}, rm: rm}
	err = prepared.try(func() {
		prepare, err := rt.RunProgram(lockdown)
		must(err)
		rm.g = installGuards(rm)
		rm.g.begin(prepared)
		if !freezing {
			return
		}
		var protos []any
		for name, names := range tamed {
			protos = append(protos, []any{object(object(rm.global, name), "prototype"), names})
		}
		var errs []any
		for _, name := range errorTypes {
			if v := rm.global.Get(name); defined(v) {
				errs = append(errs, v)
			}
		}
		fn, _ := goja.AssertFunction(prepare)
		res, err := fn(goja.Undefined(), rt.ToValue(protos), rt.ToValue(errs))
		must(err)
		ret := res.(*goja.Object)
		has := callable(ret, "0")
		rm.freezeScript = callable(ret, "1")
		rm.g.intrinsic = func(o *goja.Object) bool {
			v, err := has(goja.Undefined(), o)
			return err == nil && v.ToBoolean()
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: the engine failed: preparing a runtime: %v", ErrFailed, err)
	}
	rm.calls, rm.done, rm.ended = make(chan *call), make(chan result, 1), make(chan struct{})
	go serve(rm.calls, rm.done, rm.ended)
	rm.cleanup = runtime.AddCleanup(rm, func(calls chan *call) { close(calls) }, rm.calls)
	return rm, nil
}

// script is the function that runs s's top level in this realm and
// returns its handler, made on s's first call here.
func (rm *realm) script(s *Script) (goja.Callable, error) {
	if fn := rm.scripts[s]; fn != nil {
		return fn, nil
	}
	v, err := rm.rt.RunProgram(s.prg)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("%w: the engine failed: the script is not a function", ErrFailed)
	}
	if rm.freezeScript != nil {
		if _, err := rm.freezeScript(goja.Undefined(), v); err != nil {
			return nil, err
		}
	}
	if len(rm.scripts) >= maxScripts {
		clear(rm.scripts)
	}
	rm.scripts[s] = fn
	return fn, nil
}
