package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/redistest"
)

func TestSuggest(t *testing.T) {
	names := []string{"config", "json", "limit", "before", "nightly-report", "cleanup"}
	for _, c := range []struct{ name, in, want string }{
		{"one letter out", "confg", "config"},
		{"two swapped", "jsno", "json"},
		{"case", "CONFIG", "config"},
		{"long name, three edits", "nightly-rpeort", "nightly-report"},
		{"far from all", "xyzzy", ""},
		{"short, three edits", "jx", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := suggest(c.in, names); got != c.want {
				t.Errorf("suggest(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestLongFlags(t *testing.T) {
	root := Command(Options{})
	for _, c := range []struct {
		name string
		in   []string
		want []string
	}{
		{"one dash long", []string{"jobs", "-config", "x.hcl"}, []string{"jobs", "--config", "x.hcl"}},
		{"misspelt", []string{"jobs", "-confg", "x.hcl"}, []string{"jobs", "--confg", "x.hcl"}},
		{"with =", []string{"-config=x.hcl"}, []string{"--config=x.hcl"}},
		{"shorthand", []string{"-c", "x.hcl", "-c=y.hcl"}, []string{"-c", "x.hcl", "-c=y.hcl"}},
		{"number after a shorthand", []string{"history", "x", "-n5"}, []string{"history", "x", "-n5"}},
		{"two dashes", []string{"--json"}, []string{"--json"}},
		{"after --", []string{"trigger", "--", "-odd"}, []string{"trigger", "--", "-odd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := longFlags(root, c.in); !slices.Equal(got, c.want) {
				t.Errorf("longFlags(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// replyErr is an error reply of Redis's, as go-redis gives one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// refusal tells Redis refusing us from Redis not answering or not ready:
// the refusals are real replies of a redis-server.
func TestRefusal(t *testing.T) {
	srv := redistest.Start(t)
	srv.Do("ACL", "SETUSER", "limited", "on", ">limited-pw", "-@all")
	ping := func(user, pw string) error {
		o := srv.Options()
		o.Username, o.Password = user, pw
		rdb := redis.NewClient(o)
		defer rdb.Close()
		return fmt.Errorf("lock: ping: %w", rdb.Ping(context.Background()).Err())
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"wrong password", ping("app", "wrong"), true},
		{"ACL", ping("limited", "limited-pw"), true},
		{"loading", fmt.Errorf("lock: ping: %w", replyErr("LOADING Redis is loading the dataset in memory")), false},
		{"refused connection", errors.New("lock: ping: dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := refusal(c.err); got != c.want {
				t.Errorf("refusal(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
