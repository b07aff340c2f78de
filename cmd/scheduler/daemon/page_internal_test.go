package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A job whose replica found another definition of it in the ledger shows
// it in its row, with both digests.
func TestPageShowsAnotherVersion(t *testing.T) {
	for _, other := range []string{"", "0123456789abcdef"} {
		d := &pageData{Title: "jobs", Nav: "jobs", Now: time.Now(), Jobs: []jobRow{{
			JobJSON: JobJSON{Name: "nightly", Schedule: "@daily", Lock: "nightly", Digest: "fedcba9876543210", OtherDigest: other},
			Loc:     time.UTC,
		}}}
		var buf bytes.Buffer
		if err := pages["jobs.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
			t.Fatal(err)
		}
		html := buf.String()
		shown := strings.Contains(html, "another version in the fleet")
		switch {
		case other == "" && shown:
			t.Error("a job without another definition is shown with one")
		case other != "" && (!shown || !strings.Contains(html, `data-other-digest="`+other+`"`) || !strings.Contains(html, "fedcba9876543210")):
			t.Errorf("the row of a job with another definition lacks it or the digests:\n%s", html)
		}
	}
}
