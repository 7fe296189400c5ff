package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// call makes an API request in-process as p, the way the dashboard and the
// portal use the API: the same routes, validation and tenant scoping as
// from outside. It decodes a 2xx answer into out and returns the status;
// an error answer comes back as an *apiError.
func (s *Pages) call(ctx context.Context, p service.Caller, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(service.InProcess(ctx, p), method, path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.api.ServeHTTP(w, req)
	if w.Code >= 300 {
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		e.Status = w.Code
		return w.Code, &e
	}
	if out != nil && w.Code != http.StatusNoContent {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			return w.Code, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return w.Code, nil
}

// apiError is an API problem document.
type apiError struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

func (e *apiError) Error() string {
	msg := e.Detail
	for _, d := range e.Errors {
		msg += "; " + strings.TrimPrefix(d.Location, "body.") + ": " + d.Message
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return msg
}
