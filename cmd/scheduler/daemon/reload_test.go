package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/httpjob"
	"github.com/lockcron/lockcron/scheduler"
)

func TestDiffJobs(t *testing.T) {
	job := func(name, digest string) config.Job {
		return config.Job{Job: scheduler.Job{Name: name}, Digest: digest}
	}
	running := map[string]string{"a": "1", "b": "2", "c": "3"}
	for _, tc := range []struct {
		name string
		next []config.Job
		want jobDiff
	}{
		{"nothing changed", []config.Job{job("a", "1"), job("b", "2"), job("c", "3")},
			jobDiff{unchanged: []string{"a", "b", "c"}}},
		{"another order", []config.Job{job("c", "3"), job("a", "1"), job("b", "2")},
			jobDiff{unchanged: []string{"a", "b", "c"}}},
		{"each kind", []config.Job{job("d", "4"), job("c", "3"), job("a", "9")},
			jobDiff{added: []string{"d"}, removed: []string{"b"}, changed: []string{"a"}, unchanged: []string{"c"}}},
		{"every job removed", nil, jobDiff{removed: []string{"a", "b", "c"}}},
		{"every job new", []config.Job{job("z", "1"), job("y", "2")}, jobDiff{added: []string{"y", "z"}, removed: []string{"a", "b", "c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diffJobs(running, nil, tc.next)
			for _, l := range []struct {
				what      string
				got, want []string
			}{
				{"added", got.added, tc.want.added}, {"removed", got.removed, tc.want.removed},
				{"changed", got.changed, tc.want.changed}, {"unchanged", got.unchanged, tc.want.unchanged},
			} {
				if !slices.Equal(l.got, l.want) {
					t.Errorf("%s = %v, want %v", l.what, l.got, l.want)
				}
			}
		})
	}
}

// fakeJobs is a jobSet that records what it is asked. refuse, if set,
// decides the error of each call ("add", "update", "remove").
type fakeJobs struct {
	mu     sync.Mutex
	calls  []string // "add c", "update a", "remove b"
	jobs   map[string]scheduler.Job
	refuse func(op, name string, f *fakeJobs) error
	// inside counts the calls under way: a reload at a time makes at most 1.
	inside, most int
	hold         chan struct{} // when not nil, each call waits for it
}

func newFakeJobs(js []scheduler.Job) *fakeJobs {
	f := &fakeJobs{jobs: make(map[string]scheduler.Job)}
	for _, j := range js {
		f.jobs[j.Name] = j
	}
	return f
}

func (f *fakeJobs) do(op, name string, apply func()) error {
	f.mu.Lock()
	f.inside++
	f.most = max(f.most, f.inside)
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inside--
	f.calls = append(f.calls, op+" "+name)
	if f.refuse != nil {
		if err := f.refuse(op, name, f); err != nil {
			return err
		}
	}
	apply()
	return nil
}

func (f *fakeJobs) Add(j scheduler.Job) error {
	return f.do("add", j.Name, func() { f.jobs[j.Name] = j })
}

func (f *fakeJobs) Update(j scheduler.Job) error {
	return f.do("update", j.Name, func() { f.jobs[j.Name] = j })
}

func (f *fakeJobs) Remove(name string, _ ...scheduler.RemoveOption) error {
	return f.do("remove", name, func() { delete(f.jobs, name) })
}

func (f *fakeJobs) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// lines returns the JSON log lines with message msg.
func (s *syncBuf) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["@message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// reloadFixture is a config file, a reloader over a fakeJobs, and its log.
type reloadFixture struct {
	path string
	r    *reloader
	jobs *fakeJobs
	logs *syncBuf
}

const (
	testToken = "s3cret-admin-token"
	testHead  = `
admin {
  listen    = "127.0.0.1:0"
  token_env = "TEST_ADMIN_TOKEN"
}
log { json = true }
`
)

// testJob is an exec job block.
func testJob(name, schedule string) string {
	return fmt.Sprintf("job %q {\n  schedule = %q\n  exec { command = [\"true\"] }\n}\n", name, schedule)
}

func newReloadFixture(t *testing.T, text string, o Options) *reloadFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lockcron.hcl")
	writeFile(t, path, text)
	if o.Environ == nil {
		o.Environ = []string{"TEST_ADMIN_TOKEN=" + testToken}
	}
	o.defaults()
	cfg, err := load(path, o)
	if err != nil {
		t.Fatal(err)
	}
	js, err := cfg.SchedulerJobs(o.Registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &reloadFixture{path: path, jobs: newFakeJobs(js), logs: &syncBuf{}}
	log := hclog.New(&hclog.LoggerOptions{Name: "lockcron", JSONFormat: true, Output: f.logs})
	f.r = newReloader(cfg, f.jobs, o, log, time.Now())
	return f
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *reloadFixture) reload(t *testing.T, text string) ReloadJSON {
	t.Helper()
	writeFile(t, f.path, text)
	res, err := f.r.reload(context.Background(), triggerSignal)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if strings.Contains(f.logs.String(), testToken) {
		t.Fatalf("the log shows the admin token:\n%s", f.logs.String())
	}
	return res
}

func checkLists(t *testing.T, res ReloadJSON, added, removed, changed, unchanged []string) {
	t.Helper()
	for _, l := range []struct {
		what      string
		got, want []string
	}{{"added", res.Added, added}, {"removed", res.Removed, removed}, {"changed", res.Changed, changed}, {"unchanged", res.Unchanged, unchanged}} {
		if !slices.Equal(l.got, l.want) && !(len(l.got) == 0 && len(l.want) == 0) {
			t.Errorf("%s = %v, want %v", l.what, l.got, l.want)
		}
	}
}

func TestReloadAppliesTheDifference(t *testing.T) {
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m")+testJob("b", "@every 1m")+testJob("d", "@hourly"), Options{})
	before := f.r.current()

	// a changed, b removed, c added, d moved in the file but the same.
	text := testHead + testJob("d", "@hourly") + "# a comment\n" + testJob("a", "@every 2m") + testJob("c", "@every 1m")
	res := f.reload(t, text)
	if res.Status != ReloadApplied || len(res.Errors) != 0 || len(res.RestartNeeded) != 0 {
		t.Fatalf("reload: %+v", res)
	}
	checkLists(t, res, []string{"c"}, []string{"b"}, []string{"a"}, []string{"d"})
	if got, want := f.jobs.takeCalls(), []string{"remove b", "update a", "add c"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if f.jobs.jobs["a"].Schedule != "@every 2m" {
		t.Errorf("a's new schedule was not given: %+v", f.jobs.jobs["a"])
	}
	after := f.r.current()
	if after.Digest == before.Digest || res.ConfigDigest != after.Digest || !after.LoadedAt.After(before.LoadedAt) {
		t.Errorf("config state: before %+v, after %+v, result %s", before, after, res.ConfigDigest)
	}
	for _, n := range []string{"a", "c", "d"} {
		if rev := after.Revisions[n]; rev == "" || rev != f.jobs.jobs[n].Revision {
			t.Errorf("job %s: revision %q, the scheduler has %q", n, rev, f.jobs.jobs[n].Revision)
		}
	}
	if _, ok := after.Revisions["b"]; ok || after.Revisions["a"] == before.Revisions["a"] || after.Revisions["d"] != before.Revisions["d"] {
		t.Errorf("revisions before %v, after %v", before.Revisions, after.Revisions)
	}
	got := map[string]string{}
	for _, l := range f.logs.lines("job reloaded") {
		got[l["job"].(string)], _ = l["change"].(string)
	}
	if want := map[string]string{"a": "changed", "b": "removed", "c": "added"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("logged %v, want %v", got, want)
	}
	if len(f.logs.lines("config reloaded")) != 1 {
		t.Errorf("no \"config reloaded\" line:\n%s", f.logs.String())
	}

	// The same file again: nothing to do.
	res = f.reload(t, text)
	checkLists(t, res, nil, nil, nil, []string{"a", "c", "d"})
	if calls := f.jobs.takeCalls(); len(calls) != 0 {
		t.Errorf("a reload of the same file made calls %v", calls)
	}
}

func TestReloadOfAnInvalidFileKeepsTheJobs(t *testing.T) {
	good := testHead + testJob("a", "@every 1m")
	f := newReloadFixture(t, good, Options{})
	before := f.r.current()
	for _, tc := range []struct {
		name, text string
		places     []string // line:col of each error, in order
	}{
		{"syntax error", good + "job \"b\" {\n  schedule = \"@every 1m\"\n", []string{":11:1"}}, // the block left open
		{"unknown key and bad schedule", good + "job \"b\" {\n  schedule = \"every minute\"\n  colour = \"red\"\n  exec { command = [\"true\"] }\n}\n",
			[]string{":12:3", ":13:3"}},
		{"no file", "", []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res ReloadJSON
			if tc.name == "no file" {
				if err := os.Rename(f.path, f.path+".away"); err != nil {
					t.Fatal(err)
				}
				var err error
				res, err = f.r.reload(context.Background(), triggerSignal)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(f.path+".away", f.path); err != nil {
					t.Fatal(err)
				}
			} else {
				res = f.reload(t, tc.text)
			}
			if res.Status != ReloadInvalid || len(res.Errors) != len(tc.places) {
				t.Fatalf("reload: %+v", res)
			}
			logged := f.logs.lines("config error")
			logged = logged[len(logged)-len(tc.places):]
			for i, e := range res.Errors {
				if !strings.Contains(e.Pos, tc.places[i]) || (e.Pos != "" && !strings.HasPrefix(e.Error, e.Pos+": ")) {
					t.Errorf("error %d: %+v, want its place %q", i, e, tc.places[i])
				}
				if logged[i]["error"] != e.Error {
					t.Errorf("logged %v, want the error %q", logged[i], e.Error)
				}
			}
			if calls := f.jobs.takeCalls(); len(calls) != 0 {
				t.Errorf("an invalid file made calls %v", calls)
			}
			if st := f.r.current(); st != before || res.ConfigDigest != before.Digest {
				t.Errorf("an invalid file changed the config state: %+v", st)
			}
		})
	}
	if n := len(f.logs.lines("config not reloaded: the file is not valid; the running jobs are kept")); n != 3 {
		t.Errorf("%d refusals logged, want 3", n)
	}
}

func TestReloadKeepsGoingAfterARefusal(t *testing.T) {
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m")+testJob("b", "@every 1m"), Options{})
	// The scheduler refuses b's update as invalid (a lock shared with
	// another kind, say), and a's with an error that is not.
	f.jobs.refuse = func(op, name string, _ *fakeJobs) error {
		switch {
		case op == "update" && name == "b":
			return fmt.Errorf("scheduler: job %q: lock_kind: shared with another kind: %w", name, scheduler.ErrInvalid)
		case op == "update" && name == "a":
			return fmt.Errorf("scheduler: update job %q: %w", name, errors.ErrUnsupported)
		}
		return nil
	}
	before := f.r.current()
	res := f.reload(t, testHead+testJob("a", "@every 2m")+testJob("b", "@every 2m")+testJob("c", "@every 1m"))
	if res.Status != ReloadPartial || len(res.Errors) != 2 || res.Errors[0].Job != "a" || res.Errors[1].Job != "b" ||
		res.Errors[0].Change != "changed" || !strings.Contains(res.Errors[1].Error, "lock_kind") {
		t.Fatalf("reload: %+v", res)
	}
	checkLists(t, res, []string{"c"}, nil, nil, nil)
	// b's refusal as invalid is tried again after c's addition; a's is not.
	if got, want := f.jobs.takeCalls(), []string{"update a", "update b", "add c", "update b"}; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	st := f.r.current()
	if st.Revisions["a"] != before.Revisions["a"] || st.Revisions["b"] != before.Revisions["b"] || st.Revisions["c"] == "" {
		t.Errorf("revisions after a partial reload: %v (before %v)", st.Revisions, before.Revisions)
	}
	if n := len(f.logs.lines("job change not applied: the job stays as it ran")); n != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", n, f.logs.String())
	}
	if len(f.logs.lines("config reloaded, but some job changes were refused: those jobs stay as they ran")) != 1 {
		t.Errorf("the partial reload is not logged as such:\n%s", f.logs.String())
	}

	// The next reload tries them again.
	f.jobs.refuse = nil
	res = f.reload(t, testHead+testJob("a", "@every 2m")+testJob("b", "@every 2m")+testJob("c", "@every 1m"))
	if res.Status != ReloadApplied {
		t.Fatalf("reload: %+v", res)
	}
	checkLists(t, res, nil, nil, []string{"a", "b"}, []string{"c"})
}

// A change that is refused until another is made goes through on the
// second pass.
func TestReloadRetriesInvalidChanges(t *testing.T) {
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m"), Options{})
	f.jobs.refuse = func(op, name string, f *fakeJobs) error {
		if _, ok := f.jobs["c"]; op == "update" && name == "a" && !ok {
			return fmt.Errorf("job a needs c first: %w", scheduler.ErrInvalid)
		}
		return nil
	}
	res := f.reload(t, testHead+testJob("a", "@every 2m")+testJob("c", "@every 1m"))
	if res.Status != ReloadApplied || len(res.Errors) != 0 {
		t.Fatalf("reload: %+v", res)
	}
	checkLists(t, res, []string{"c"}, nil, []string{"a"}, nil)
}

func TestReloadReportsSettingsThatNeedARestart(t *testing.T) {
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m"), Options{})
	text := strings.Replace(testHead, `"127.0.0.1:0"`, `"127.0.0.1:1"`, 1) + "redis { url = \"redis://:hunter22@127.0.0.1:6379\" }\n" + testJob("a", "@every 2m")
	res := f.reload(t, text)
	if res.Status != ReloadApplied || !slices.Equal(res.RestartNeeded, []string{"redis", "admin.listen"}) {
		t.Fatalf("reload: %+v", res)
	}
	checkLists(t, res, nil, nil, []string{"a"}, nil)
	warn := f.logs.lines("config settings changed that need a restart: their running values are kept")
	if len(warn) != 1 || fmt.Sprint(warn[0]["settings"]) != "[redis admin.listen]" {
		t.Errorf("warning: %v\n%s", warn, f.logs.String())
	}
	if strings.Contains(f.logs.String(), "hunter22") {
		t.Errorf("the log shows the redis password:\n%s", f.logs.String())
	}
	// The running settings are kept: the next reload compares with them.
	if res := f.reload(t, text); !slices.Equal(res.RestartNeeded, []string{"redis", "admin.listen"}) {
		t.Errorf("second reload: restart needed %v", res.RestartNeeded)
	}
}

func TestReloadResolvesFuncJobs(t *testing.T) {
	reg := jobs.NewRegistry()
	ran := make(chan struct{}, 1)
	if err := reg.Register("sweep", func(context.Context) error { ran <- struct{}{}; return nil }); err != nil {
		t.Fatal(err)
	}
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m"), Options{Registry: reg})
	res := f.reload(t, testHead+testJob("a", "@every 1m")+"job \"s\" {\n  schedule = \"@hourly\"\n  func = \"sweep\"\n}\n")
	checkLists(t, res, []string{"s"}, nil, nil, []string{"a"})
	j := f.jobs.jobs["s"]
	if j.Run == nil {
		t.Fatalf("the func job has no Run")
	}
	if err := j.Run.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	default:
		t.Errorf("the func job's Run is not the registered func")
	}
	// A func the registry does not hold: invalid, with its place.
	res = f.reload(t, testHead+testJob("a", "@every 1m")+"job \"s\" {\n  schedule = \"@hourly\"\n  func = \"sweeep\"\n}\n")
	if res.Status != ReloadInvalid || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Error, `"sweeep" is not registered`) || res.Errors[0].Pos == "" {
		t.Errorf("unknown func: %+v", res)
	}
}

func TestReloadsAreSerialised(t *testing.T) {
	f := newReloadFixture(t, testHead+testJob("a", "@every 1m"), Options{})
	writeFile(t, f.path, testHead+testJob("a", "@every 1m")+testJob("b", "@every 1m")+testJob("c", "@every 1m"))
	f.jobs.hold = make(chan struct{})
	var wg sync.WaitGroup
	results := make(chan ReloadJSON, 3)
	for range 3 {
		wg.Go(func() {
			res, err := f.r.reload(context.Background(), triggerAPI)
			if err != nil {
				t.Errorf("reload: %v", err)
			}
			results <- res
		})
	}
	// Let the calls through one by one.
	for range 2 {
		f.jobs.hold <- struct{}{}
	}
	close(f.jobs.hold)
	wg.Wait()
	close(results)
	if f.jobs.most != 1 {
		t.Errorf("%d calls at once: reloads overlapped", f.jobs.most)
	}
	var added []string
	for res := range results {
		added = append(added, res.Added...)
	}
	slices.Sort(added)
	if !slices.Equal(added, []string{"b", "c"}) {
		t.Errorf("added %v over three reloads, want b and c once", added)
	}

	// A reload that waits gives up when its ctx ends.
	f.r.sem <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := f.r.reload(ctx, triggerAPI); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("reload while another runs, ctx ended: %v", err)
	}
	<-f.r.sem

	// Closed: no more reloads.
	f.r.close()
	if _, err := f.r.reload(context.Background(), triggerAPI); !errors.Is(err, errStopping) {
		t.Errorf("reload after close: %v", err)
	}
}

func TestReloadAPI(t *testing.T) {
	good := testHead + testJob("a", "@every 1m")
	f := newReloadFixture(t, good, Options{})
	const opsToken = "ops-token"
	a := &admin{access: newAccess(config.Admin{Tokens: []config.Token{
		{Name: config.LegacyTokenName, Scope: config.ScopeAdmin, Value: config.NewSecret(testToken)},
		{Name: "ops", Scope: config.ScopeOperate, Value: config.NewSecret(opsToken)},
	}}), log: hclog.NewNullLogger(), reload: f.r}
	srv := httptest.NewServer(a.handler())
	defer srv.Close()
	post := func(token string) (int, ReloadJSON, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/reload", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		var res ReloadJSON
		_ = json.Unmarshal(buf.Bytes(), &res)
		return resp.StatusCode, res, buf.String()
	}

	writeFile(t, f.path, good+testJob("b", "@every 1m"))
	for _, tok := range []string{"", "wrong"} {
		if st, _, body := post(tok); st != http.StatusUnauthorized || strings.Contains(body, testToken) {
			t.Errorf("token %q: %d %s, want 401", tok, st, body)
		}
	}
	// An operate token may not reload: 403, naming the scope needed.
	if st, _, body := post(opsToken); st != http.StatusForbidden || !strings.Contains(body, `token \"ops\" has scope operate: reload needs a token of scope admin`) {
		t.Errorf("operate token: %d %s, want 403 naming scope admin", st, body)
	}
	if calls := f.jobs.takeCalls(); len(calls) != 0 {
		t.Errorf("a refused request reloaded: %v", calls)
	}
	st, res, body := post(testToken)
	if st != http.StatusOK || res.Status != ReloadApplied || !slices.Equal(res.Added, []string{"b"}) || res.Trigger != "api" || res.ConfigDigest == "" {
		t.Errorf("reload: %d %s", st, body)
	}
	writeFile(t, f.path, good+"job \"c\" {\n  schedul = \"@every 1m\"\n")
	if st, res, body := post(testToken); st != http.StatusUnprocessableEntity || res.Status != ReloadInvalid || len(res.Errors) == 0 || res.Errors[0].Pos == "" {
		t.Errorf("invalid file: %d %s", st, body)
	}
	f.r.close()
	if st, _, body := post(testToken); st != http.StatusServiceUnavailable {
		t.Errorf("while stopping: %d %s", st, body)
	}
}

// A job whose secrets alone changed (which its digest leaves out) is
// changed for a reload, so that a rotated token is applied.
func TestDiffJobsSeesSecrets(t *testing.T) {
	job := func(token string) config.Job {
		return config.Job{Job: scheduler.Job{Name: "h"}, Digest: "1", Kind: config.KindHTTP,
			HTTP: &httpjob.HTTP{URL: "https://example.com/hook", Headers: map[string]string{"Authorization": "Bearer " + token}}}
	}
	running := map[string]string{"h": "1"}
	secrets := map[string]string{"h": job("one").SecretsDigest()}
	if d := diffJobs(running, secrets, []config.Job{job("one")}); !slices.Equal(d.unchanged, []string{"h"}) {
		t.Errorf("the same token: %+v", d)
	}
	if d := diffJobs(running, secrets, []config.Job{job("two")}); !slices.Equal(d.changed, []string{"h"}) {
		t.Errorf("another token: %+v, want h changed", d)
	}
}
