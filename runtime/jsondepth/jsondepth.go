// Package jsondepth measures how deeply a JSON document nests, without
// decoding it: the event catalog bounds its schemas with it, the
// transformations JSON.parse's input, before a recursive parser meets it.
package jsondepth

// Of is the deepest nesting of objects and arrays in the JSON document b
// (brackets inside strings skipped). Malformed JSON gets a depth too: the
// parser that follows refuses it.
func Of[T string | []byte](b T) int {
	d, most, inString, escaped := 0, 0, false, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			most = max(most, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return most
}
