package docstest

import (
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// TestRepositoryLinks: every relative link of every markdown file of the
// repository leads to a file of it (and, with #, to a heading there).
func TestRepositoryLinks(t *testing.T) {
	files, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["docs/design.md"]; !ok {
		t.Fatalf("no docs/design.md under %s", root)
	}
	for _, p := range Check(files) {
		t.Error(p)
	}
}

// TestNothingPointsOutside: no file of the repository names the design
// document this project started from, which is not part of it.
func TestNothingPointsOutside(t *testing.T) {
	files, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	delete(files, "pipeline/docstest/docstest.go")      // the pattern itself
	delete(files, "pipeline/docstest/docstest_test.go") // and its test
	for _, f := range Outside(files) {
		t.Errorf("%s refers to a document outside the repository", f)
	}
}

// TestDocsNameExistingTests: every test the documentation names (a TestXxx
// word, in backticks or not) is a test function of the repository, so
// "pinned by" cannot rot; a name followed by "..." is a prefix of some.
func TestDocsNameExistingTests(t *testing.T) {
	files, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	def := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	for name, text := range files {
		if strings.HasSuffix(name, "_test.go") {
			for _, m := range def.FindAllStringSubmatch(text, -1) {
				defined[m[1]] = true
			}
		}
	}
	named := regexp.MustCompile(`\b(Test[A-Z][A-Za-z0-9_]*)\b`)
	n := 0
	for name, text := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, m := range named.FindAllStringSubmatchIndex(text, -1) {
			n++
			test := text[m[2]:m[3]]
			if strings.HasPrefix(text[m[3]:], "...") { // a prefix, as in TestVirtual...
				if !slices.ContainsFunc(slices.Collect(maps.Keys(defined)), func(d string) bool { return strings.HasPrefix(d, test) }) {
					t.Errorf("%s names tests %s..., and no test file defines one", name, test)
				}
				continue
			}
			if !defined[test] {
				t.Errorf("%s names %s, which no test file defines", name, test)
			}
		}
	}
	if n < 30 {
		t.Errorf("the documentation names %d tests; docs/design.md alone pins each invariant with several", n)
	}
}

// TestBubbleTestsNamedVirtual: every test that runs a testing/synctest
// bubble is named TestVirtual..., the name `make test` selects them by: the
// race detector crashed the runtime in a bubble's timer once (go1.26.8,
// `__tsan::SlotLock` from `(*timer).unlockAndRun`), so they run in a pass
// of their own without -race, with the synctests tag; every other test runs
// with -race and without it.
func TestBubbleTestsNamedVirtual(t *testing.T) {
	files, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	def := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	n := 0
	for name, text := range files {
		if !strings.HasSuffix(name, "_test.go") || name == "pipeline/docstest/docstest_test.go" {
			continue
		}
		funcs := def.FindAllStringSubmatchIndex(text, -1)
		for at := 0; ; {
			i := strings.Index(text[at:], "synctest.Test(")
			if i < 0 {
				break
			}
			at += i + 1
			n++
			enclosing := ""
			for _, f := range funcs {
				if f[0] < at {
					enclosing = text[f[2]:f[3]]
				}
			}
			if !strings.HasPrefix(enclosing, "TestVirtual") {
				t.Errorf("%s: %q runs a synctest bubble but is not named TestVirtual...", name, enclosing)
			}
		}
	}
	if n == 0 {
		t.Error("no test runs a synctest bubble: the check reads nothing")
	}
}

// TestCheckerFindsProblems: the checker reports a missing file, a missing
// heading, an escaping link and an absolute one, and accepts good links,
// links in code blocks and web links.
func TestCheckerFindsProblems(t *testing.T) {
	files := map[string]string{
		"README.md": "[ok](docs/a.md) [dir](docs) [head](docs/a.md#second-part) [self](#top) [web](https://example.com/x)\n" +
			"[gone](docs/missing.md) [nohead](docs/a.md#nowhere) [out](../outside/x.md) [abs](/etc/passwd)\n" +
			"```\n[in code](nowhere.md)\n```\n# Top\n",
		"docs/a.md": "# A\n## Second part\n[up](../README.md#top) [dup](#a-1)\n## A\n",
		"docs/b.go": "package b\n",
	}
	var got []string
	for _, p := range Check(files) {
		got = append(got, p.File+" "+p.Link)
	}
	slices.Sort(got)
	want := []string{"README.md ../outside/x.md", "README.md /etc/passwd", "README.md docs/a.md#nowhere", "README.md docs/missing.md"}
	if !slices.Equal(got, want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	if out := Outside(map[string]string{"a.go": "// see DESIGN.md", "b.md": "fine"}); !slices.Equal(out, []string{"a.go"}) {
		t.Fatalf("Outside = %v", out)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"4. Retries":                        "4-retries",
		"Invariant 1: Nothing is lost":      "invariant-1-nothing-is-lost",
		"Event (value on `events`)":         "event-value-on-events",
		"What an endpoint receives":         "what-an-endpoint-receives",
		"WebhooksRetrierWindowOverrun":      "webhooksretrierwindowoverrun",
		"make run":                          "make-run",
		"Secrets at rest / keys_and-hyphen": "secrets-at-rest--keys_and-hyphen",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDesignMapsEveryPackage: the design's map of the code names every
// package of the repository, and nothing that is not one.
func TestDesignMapsEveryPackage(t *testing.T) {
	files, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	design := files["docs/design.md"]
	at := strings.Index(design, "## 10. Map of the code")
	if at < 0 {
		t.Fatal("docs/design.md has no map of the code")
	}
	mapped := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9/]+/)`").FindAllStringSubmatch(design[at:], -1) {
		mapped[strings.TrimSuffix(m[1], "/")] = true
	}
	packages := map[string]bool{}
	for name := range files {
		dir := path.Dir(name)
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.Contains(name, "testdata/") {
			packages[dir] = true
		}
	}
	for p := range packages {
		if !mapped[p] {
			t.Errorf("the map of the code in docs/design.md does not name %s/", p)
		}
	}
	for p := range mapped {
		if !packages[p] {
			t.Errorf("the map of the code names %s/, which holds no package", p)
		}
	}
}
