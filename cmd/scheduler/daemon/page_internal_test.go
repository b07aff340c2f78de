package daemon

import (
	"bytes"
	"net"
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

// The status page's URL in the log: a listener on every interface is
// reached on localhost.
func TestPageURL(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1:9090", "http://127.0.0.1:9090/"},
		{"0.0.0.0:9090", "http://localhost:9090/"},
		{"[::]:9090", "http://localhost:9090/"},
		{"[::1]:9090", "http://[::1]:9090/"},
		{"10.0.0.5:8080", "http://10.0.0.5:8080/"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := pageURL(addr); got != c.want {
			t.Errorf("pageURL(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}
