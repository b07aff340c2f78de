package scheduler_test

import (
	"os"
	"strings"
	"testing"
)

// The README's Go snippets are copies of example functions (lock's
// ExampleNew, scheduler's Example_readme), so that they compile: every
// line of each is in one of the example files.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, f := range []string{"../lock/example_test.go", "example_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			lines[strings.TrimSpace(l)] = true
		}
	}
	snippets := 0
	for i, block := range strings.Split(string(readme), "```go\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if !ok {
			t.Fatalf("snippet %d is not closed", i+1)
		}
		snippets++
		for _, l := range strings.Split(body, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || l == "func main() {" {
				continue
			}
			if !lines[l] {
				t.Errorf("README Go snippet %d: %q is in no example function", i+1, l)
			}
		}
	}
	if snippets < 2 {
		t.Errorf("%d Go snippets in the README, want the lock's and the scheduler's", snippets)
	}
}
