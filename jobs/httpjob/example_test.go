package httpjob_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/httpjob"
)

// An http job: the run's info travels in Lockcron-* headers, and an
// unexpected status is a *StatusError.
func ExampleHTTP() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path, r.Header.Get("Lockcron-Job"), r.Header.Get("Lockcron-Token"))
		http.Error(w, "ledger closed", http.StatusConflict)
	}))
	defer srv.Close()

	r := &httpjob.HTTP{URL: srv.URL + "/close-day", Method: "POST", Body: `{"dry_run":false}`}
	ctx := jobs.WithInfo(context.Background(), jobs.Info{Job: "close-day", Token: 42})
	err := r.Run(ctx)
	var se *httpjob.StatusError
	if errors.As(err, &se) {
		fmt.Println(se.Code, se.Body)
	}
	// Output:
	// POST /close-day close-day 42
	// 409 ledger closed
}
