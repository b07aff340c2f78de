package execjob

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain makes this test binary the supervisor of its exec runs, as a
// program that runs exec jobs does in its main.
func TestMain(m *testing.M) {
	if code, ok := Supervise(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
