//go:build !linux

package main

// stopWithParent does nothing outside Linux (no parent-death signal).
func stopWithParent() error { return nil }
