// Package version is the version every binary reports (--version): the
// Makefile and the Dockerfile stamp it at build time with
// -ldflags "-X github.com/hookpipe/hookpipe/runtime/version.Version=...".
package version

// Version is "dev" in a build that was not stamped.
var Version = "dev"
