// Command configdoc writes docs/configuration.md from the configuration
// structs' tags (make docs).
package main

import (
	"fmt"
	"os"

	"github.com/hookpipe/hookpipe/pipeline/internal/configdoc"
)

func main() {
	if err := os.WriteFile(configdoc.Path, []byte(configdoc.Render()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
