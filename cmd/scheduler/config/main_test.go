package config_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/jobs/execjob"
)

func TestMain(m *testing.M) {
	// TestExampleConfig runs exec jobs, whose supervisor is this binary.
	if code, ok := execjob.Supervise(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
