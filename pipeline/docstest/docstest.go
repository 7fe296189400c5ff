// Package docstest checks the repository's documentation: every relative
// link of every markdown file leads to a file (and heading) of the
// repository, nothing points outside it, and every test the design names
// exists.
package docstest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// A Problem is one broken reference.
type Problem struct {
	File, Link, Reason string
}

func (p Problem) String() string { return fmt.Sprintf("%s: %s: %s", p.File, p.Link, p.Reason) }

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("^\\s*```")
	// outside are references to what is not in the repository: the design
	// this project started from lived next to it, not in it.
	outside = regexp.MustCompile(`DESIGN\.md|\.\./shared/|/work/shared`)
)

// Check returns the problems of the markdown files in files (path, from the
// repository root, to content); other files serve as link targets only.
func Check(files map[string]string) []Problem {
	var out []Problem
	for name, text := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, link := range links(text) {
			if p, bad := checkLink(files, name, link); bad {
				out = append(out, p)
			}
		}
	}
	return out
}

// links returns the link targets of a markdown text, outside code blocks.
func links(text string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

func checkLink(files map[string]string, from, link string) (Problem, bool) {
	bad := func(reason string) (Problem, bool) { return Problem{File: from, Link: link, Reason: reason}, true }
	if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
		return Problem{}, false
	}
	target, anchor, _ := strings.Cut(link, "#")
	file := from
	if target != "" {
		if strings.HasPrefix(target, "/") {
			return bad("absolute path: write it relative to " + from)
		}
		file = path.Clean(path.Join(path.Dir(from), target))
		if file == ".." || strings.HasPrefix(file, "../") {
			return bad("leaves the repository")
		}
		if !exists(files, file) {
			return bad("no such file or directory")
		}
	}
	if anchor == "" {
		return Problem{}, false
	}
	text, ok := files[file]
	if !ok || !strings.HasSuffix(file, ".md") {
		return bad("an anchor into a file that is not markdown")
	}
	if !anchors(text)[anchor] {
		return bad("no heading #" + anchor + " in " + file)
	}
	return Problem{}, false
}

// exists reports whether name is a file of files or a directory holding one.
func exists(files map[string]string, name string) bool {
	if _, ok := files[name]; ok {
		return true
	}
	for f := range files {
		if strings.HasPrefix(f, name+"/") {
			return true
		}
	}
	return false
}

// anchors returns the heading anchors of a markdown text, as GitHub makes
// them (Slug, with -1, -2 ... for repeats).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inCode = !inCode
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		s := Slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Slug is GitHub's anchor of a heading: lower case, punctuation dropped
// but for hyphens and underscores, spaces made hyphens.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Outside returns the files of files that mention what is not in the
// repository (the original design document and its folder).
func Outside(files map[string]string) []string {
	var out []string
	for name, text := range files {
		if outside.MatchString(text) {
			out = append(out, name)
		}
	}
	return out
}

// skipped are the directories that hold no documentation of the project.
var skipped = map[string]bool{".git": true, ".build": true, "bin": true, ".run": true, "node_modules": true}

// Load reads the text files of the repository at root, by path from root.
func Load(root string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipped[d.Name()] && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return files, err
}
