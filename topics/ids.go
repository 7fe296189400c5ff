package topics

import "crypto/rand"

// idAlphabet is what random ids are made of: subscription ids (sub_),
// event ids webhookctl makes up (evt_), API key ids (key_).
const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns prefix + 20 characters drawn uniformly from idAlphabet.
func NewID(prefix string) string {
	const n = 20
	// Bytes at or above the largest multiple of len(idAlphabet) are
	// rejected so that every character is equally likely.
	const limit = 256 - 256%len(idAlphabet)
	id := []byte(prefix)
	var buf [n]byte
	for len(id) < len(prefix)+n {
		rand.Read(buf[:])
		for _, b := range buf {
			if int(b) < limit && len(id) < len(prefix)+n {
				id = append(id, idAlphabet[int(b)%len(idAlphabet)])
			}
		}
	}
	return string(id)
}
