package api

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"sort"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"
)

// docsOperation is one operation as the docs page lists it.
type docsOperation struct {
	Method, Path, Summary, Description string
	Admin                              bool
}

// assets are the front-end assets make assets fetched from the npm registry
// (assets/npm.lock) into assets/dist; a binary built without them serves
// the list page at /docs.
//
//go:embed assets
var assets embed.FS

// swaggerUI is where the Swagger UI files are in assets.
const swaggerUI = "assets/dist/swagger-ui-dist"

// referencePage is the interactive reference: Swagger UI over
// /openapi.json, every file served by the API itself (huma's own page loads
// its script from a CDN, which a cluster without egress cannot reach), no
// inline script, so the Content-Security-Policy allows scripts of the
// API's origin only.
const referencePage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>hookpipe API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<noscript>This page needs JavaScript; <a href="/docs/list">the list of operations</a> does not.</noscript>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/reference.js"></script>
</body>
</html>
`

// referenceScript starts Swagger UI; "Authorize" takes an API key.
const referenceScript = `window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#reference",
  deepLinking: true,
  persistAuthorization: false,
  tryItOutEnabled: false
});
`

// referenceCSP allows the page's own scripts and styles (Swagger UI sets
// inline styles) and requests to the API itself, nothing else.
const referenceCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsPage lists the operations of the OpenAPI document, with no script.
var docsPage = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}code{background:#eee;padding:0 .2em}h2{font-size:1.1em;margin-top:1.5em}</style>
</head>
<body>
<h1>{{.Title}} {{.Version}}</h1>
<p>{{.Description}}</p>
<p>The OpenAPI 3.1 document: <a href="/openapi.json">/openapi.json</a> (<a href="/openapi.yaml">YAML</a>).</p>
{{range .Operations}}<h2><code>{{.Method}} {{.Path}}</code> {{.Summary}}</h2>
<p>{{.Description}}{{if .Admin}} <em>Admin key.</em>{{end}}</p>
{{end}}</body>
</html>
`))

// registerDocs serves the reference at GET /docs (the list page when the
// binary was built without its assets) and the list at /docs/list, without
// authentication, as /openapi.json.
func (s *Server) registerDocs() {
	ui, err := fs.Sub(assets, swaggerUI)
	if err == nil {
		_, err = fs.Stat(ui, "swagger-ui-bundle.js")
	}
	if err == nil {
		s.mux.Handle("GET /docs/assets/", http.StripPrefix("/docs/assets/", http.FileServerFS(ui)))
		s.mux.HandleFunc("GET /docs/reference.js", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			_, _ = w.Write([]byte(referenceScript))
		})
		s.mux.HandleFunc("GET /docs", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Security-Policy", referenceCSP)
			_, _ = w.Write([]byte(referencePage))
		})
	}
	s.mux.HandleFunc("GET /docs/list", s.docsList)
	if err != nil {
		s.mux.HandleFunc("GET /docs", s.docsList)
	}
}

// docsList serves the list page.
func (s *Server) docsList(w http.ResponseWriter, _ *http.Request) {
	var page bytes.Buffer
	if err := docsPage.Execute(&page, docsOf(s.api.OpenAPI())); err != nil {
		s.log.Error("rendering the docs page", zap.Error(err))
		http.Error(w, "internal error: see the API's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(page.Bytes())
}

// docsOf is what the docs page shows of doc: its title and its operations
// by path and method.
func docsOf(doc *huma.OpenAPI) map[string]any {
	var ops []docsOperation
	for path, item := range doc.Paths {
		for _, o := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if o != nil {
				ops = append(ops, docsOperation{Method: o.Method, Path: path, Summary: o.Summary, Description: o.Description,
					Admin: o.Metadata[adminOnly] == true})
			}
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Path != ops[j].Path {
			return ops[i].Path < ops[j].Path
		}
		return ops[i].Method < ops[j].Method
	})
	return map[string]any{"Title": doc.Info.Title, "Version": doc.Info.Version, "Description": doc.Info.Description, "Operations": ops}
}
