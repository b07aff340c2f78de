package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/jobs"
)

// marker marks, in a test's HCL source, the place an error is expected
// at. writeConfig removes the markers and returns their places.
const marker = "@@"

// writeConfig writes src (without its markers) to a file with the given
// mode, and returns its path and the places of the markers, in order, as
// "path:line:col".
func writeConfig(t *testing.T, src string, mode os.FileMode) (string, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lockcron.hcl")
	var clean strings.Builder
	var marks []int // offsets in clean
	for {
		i := strings.Index(src, marker)
		if i < 0 {
			clean.WriteString(src)
			break
		}
		clean.WriteString(src[:i])
		marks = append(marks, clean.Len())
		src = src[i+len(marker):]
	}
	text := clean.String()
	places := make([]string, len(marks))
	for n, off := range marks {
		line := strings.Count(text[:off], "\n") + 1
		col := off - strings.LastIndex(text[:off], "\n")
		places[n] = path + ":" + itoa(line) + ":" + itoa(col)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
	return path, places
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// testRegistry holds the funcs the tests' configs name.
func testRegistry(t *testing.T) *jobs.Registry {
	t.Helper()
	r := jobs.NewRegistry()
	for _, name := range []string{"nightly-report", "cleanup"} {
		if err := r.Register(name, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// load loads src with env as the whole environment and the test registry.
func load(t *testing.T, src string, env ...string) (*config.Config, []string, error) {
	t.Helper()
	path, places := writeConfig(t, src, 0o600)
	cfg, err := config.Load(path, config.WithEnviron(env), config.WithRegistry(testRegistry(t)))
	return cfg, places, err
}

// mustLoad loads src and fails the test on an error.
func mustLoad(t *testing.T, src string, env ...string) *config.Config {
	t.Helper()
	cfg, _, err := load(t, src, env...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

// errorList returns the *config.Errors in err.
func errorList(t *testing.T, err error) config.Errors {
	t.Helper()
	if err == nil {
		t.Fatal("Load: no error")
	}
	var es config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Load: %T is not config.Errors: %v", err, err)
	}
	var one *config.Error
	if !errors.As(err, &one) {
		t.Fatalf("errors.As(*config.Error) fails on %v", err)
	}
	return es
}

// job is a valid job block, for tests about other settings.
const job = `
job "x" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
`
