// Package service holds what the API's two front ends share: the JSON
// routes (package api) and the dashboard and portal pages (internal/ui).
// It knows who calls (Caller, Callers) and the resources as the API shows
// them, the values both the routes answer and the pages render.
package service

import (
	"context"
	"crypto/subtle"

	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/topics"
)

// Caller is who a request acts as.
type Caller struct {
	KeyID  string // "" for the bootstrap admin key
	Tenant string // "" for an admin
}

// Admin reports whether c is an admin.
func (c Caller) Admin() bool { return c.Tenant == "" }

// Sees reports whether c may see a resource of tenant: admins see every
// tenant, a tenant key its own only.
func (c Caller) Sees(tenant string) bool { return c.Admin() || c.Tenant == tenant }

// Callers are the keys a caller may present.
type Callers struct {
	AdminKey string // the bootstrap admin key; "" for none
	Keys     *table.KeyTable
}

// Of looks a presented key up: the bootstrap admin key, or a key of the
// apikeys topic that is not revoked.
func (cs Callers) Of(key string) (Caller, bool) {
	if key == "" {
		return Caller{}, false
	}
	if cs.AdminKey != "" && subtle.ConstantTimeCompare([]byte(key), []byte(cs.AdminKey)) == 1 {
		return Caller{}, true
	}
	k, ok := cs.Keys.ByHash(topics.HashAPIKey(key))
	if !ok || k.Revoked() {
		return Caller{}, false
	}
	return Caller{KeyID: k.ID, Tenant: k.Tenant}, true
}

// AdminKeyValid reports whether id names an admin key of the apikeys topic
// that is not revoked.
func (cs Callers) AdminKeyValid(id string) bool {
	k, ok := cs.Keys.Get(id)
	return ok && !k.Revoked() && k.Tenant == ""
}

type inProcessKey struct{}

// InProcess carries c in ctx for a request the pages make in-process on
// behalf of a session they verified. A request from outside cannot set a
// context value.
func InProcess(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, inProcessKey{}, c)
}

// InProcessCaller is the caller InProcess carries in ctx.
func InProcessCaller(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(inProcessKey{}).(Caller)
	return c, ok
}
