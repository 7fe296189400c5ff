package main

import "crypto/rand"

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// randomID returns prefix + 20 characters drawn uniformly from idAlphabet.
func randomID(prefix string) string {
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
