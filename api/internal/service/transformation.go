package service

// TransformationTestOutput is the answer of POST /v1/transformations/test.
type TransformationTestOutput struct {
	Body struct {
		OK      bool              `json:"ok" doc:"The script ran and returned a webhook (or cancelled it)."`
		Cancel  bool              `json:"cancel,omitempty" doc:"The script cancelled the delivery: nothing would be sent."`
		Method  string            `json:"method,omitempty"`
		URL     string            `json:"url,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
		Body    string            `json:"body,omitempty" doc:"The body that would be sent (then signed)."`
		Error   string            `json:"error,omitempty" doc:"Why the script failed: it threw (with the line), went over a limit, or returned something else. A delivery would be dead-lettered with category transformation."`
	}
}
