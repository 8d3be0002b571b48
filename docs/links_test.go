package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// TestLinks checks every relative link of README.md, docs/*.md and the
// examples' READMEs: the file it names exists, and so does the heading its
// #anchor names.
func TestLinks(t *testing.T) {
	root := os.DirFS("..")
	files, err := fs.Glob(root, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := fs.Glob(root, "examples/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(append([]string{"README.md"}, files...), examples...)
	n := 0
	for _, f := range files {
		ls, err := links(root, f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(ls)
	}
	if n == 0 {
		t.Fatalf("no links found in %v: is the parser broken?", files)
	}
	for _, p := range check(root, files) {
		t.Error(p)
	}
}

// TestCheckFindsBrokenLinks makes sure the check can fail.
func TestCheckFindsBrokenLinks(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n" +
			"[ok](docs/a.md) [ok](docs/a.md#how-it-works-in-go) [ok](#top) [web](https://example.com/x.md)\n" +
			"[missing file](docs/b.md)\n" +
			"[missing anchor](docs/a.md#nowhere)\n" +
			"`[in code](docs/c.md)`\n" +
			"```\n[in a fence](docs/d.md)\n```\n")},
		"docs/a.md": {Data: []byte("# A\n\n## How it works: in `Go`\n\n[up](../README.md#top) [escape](../../x.md) [self](#missing)\n")},
	}
	got := check(fsys, []string{"README.md", "docs/a.md"})
	want := []string{
		`README.md:4: [missing file](docs/b.md): no file docs/b.md`,
		`README.md:5: [missing anchor](docs/a.md#nowhere): no heading "nowhere" in docs/a.md`,
		`docs/a.md:5: [escape](../../x.md): outside the repository`,
		`docs/a.md:5: [self](#missing): no heading "missing" in docs/a.md`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Quickstart", "quickstart"},
		{"Rate limit service: `tblimit serve`", "rate-limit-service-tblimit-serve"},
		{"Plans, shadow mode, Wait, Peek and Reset", "plans-shadow-mode-wait-peek-and-reset"},
		{"On the model of a real server (this machine)", "on-the-model-of-a-real-server-this-machine"},
		{"Request IDs: exactly once, like idempotency keys", "request-ids-exactly-once-like-idempotency-keys"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"The [CLI](cli.md)", "the-cli"},
	} {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// A link is one [text](target) of a markdown file.
type link struct {
	line         int
	text, target string
}

var (
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s{0,3}\[([^\]]+)\]:\s*<?([^\s>]+)>?`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
)

// check returns a line per broken relative link in files, in order.
func check(fsys fs.FS, files []string) []string {
	var problems []string
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name string) (map[string]bool, error) {
		if a, ok := anchors[name]; ok {
			return a, nil
		}
		a, err := headings(fsys, name)
		anchors[name] = a
		return a, err
	}
	for _, f := range files {
		ls, err := links(fsys, f)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, l := range ls {
			if p := checkLink(fsys, f, l, anchorsOf); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: [%s](%s): %s", f, l.line, l.text, l.target, p))
			}
		}
	}
	return problems
}

// checkLink says what is wrong with l, a link of file from, or "".
func checkLink(fsys fs.FS, from string, l link, anchorsOf func(string) (map[string]bool, error)) string {
	u, err := url.Parse(l.target)
	if err != nil {
		return err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "" // not relative: the web's business
	}
	target := from
	if u.Path != "" {
		target = path.Join(path.Dir(from), u.Path)
		if target == ".." || strings.HasPrefix(target, "../") || path.IsAbs(u.Path) {
			return "outside the repository"
		}
		if _, err := fs.Stat(fsys, target); err != nil {
			return "no file " + target
		}
	}
	if u.Fragment == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		return "an anchor in a file that is not markdown"
	}
	a, err := anchorsOf(target)
	if err != nil {
		return err.Error()
	}
	if !a[u.Fragment] {
		return fmt.Sprintf("no heading %q in %s", u.Fragment, target)
	}
	return ""
}

// lines calls f with each line of name outside fenced code blocks.
func lines(fsys fs.FS, name string, f func(n int, line string)) error {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	var fence string // the fence that opened the block we are in, or ""
	s := bufio.NewScanner(strings.NewReader(string(b)))
	s.Buffer(nil, 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		f(n, line)
	}
	return s.Err()
}

// links returns the links of name, outside code blocks and code spans.
func links(fsys fs.FS, name string) ([]link, error) {
	var ls []link
	err := lines(fsys, name, func(n int, line string) {
		spans := codeSpan.FindAllStringIndex(line, -1)
		inCode := func(i int) bool {
			for _, s := range spans {
				if s[0] <= i && i < s[1] {
					return true
				}
			}
			return false
		}
		for _, m := range inlineLink.FindAllStringSubmatchIndex(line, -1) {
			if !inCode(m[0]) {
				ls = append(ls, link{n, line[m[2]:m[3]], line[m[4]:m[5]]})
			}
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			ls = append(ls, link{n, m[1], m[2]})
		}
	})
	return ls, err
}

// headings returns the anchors GitHub gives the headings of name: a repeated
// slug gets -1, -2, ... as GitHub numbers them.
func headings(fsys fs.FS, name string) (map[string]bool, error) {
	anchors := map[string]bool{}
	seen := map[string]int{}
	err := lines(fsys, name, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[2])
		if k := seen[s]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors, err
}

// slug is GitHub's anchor for a heading: the text as rendered (a link's text,
// not its target), lower case, spaces turned to '-', and every other
// character but letters, digits, '-' and '_' dropped.
func slug(h string) string {
	h = inlineLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
