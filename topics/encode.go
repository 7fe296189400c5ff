package topics

import "encoding/json"

// encodeRecord renders a record value with encoding/json. Only unsupported
// types fail to marshal, and the records have none: a failure is a bug.
func encodeRecord(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
