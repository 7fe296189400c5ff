package api

import (
	"bytes"
	"html/template"
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

// docsPage lists the operations of the OpenAPI document. It is rendered by
// the API itself, with no script: huma's own page loads its script from a
// CDN, which a cluster without egress cannot reach.
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

// registerDocs serves GET /docs without authentication, as /openapi.json.
func (s *Server) registerDocs() {
	s.mux.HandleFunc("GET /docs", func(w http.ResponseWriter, _ *http.Request) {
		var page bytes.Buffer
		if err := docsPage.Execute(&page, docsOf(s.api.OpenAPI())); err != nil {
			s.log.Error("rendering the docs page", zap.Error(err))
			http.Error(w, "internal error: see the API's log", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		_, _ = w.Write(page.Bytes())
	})
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
