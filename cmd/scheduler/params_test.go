package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// postJSON sends a POST with a JSON body and returns the status and the
// answer's error field.
func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := httpc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var res struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&res)
	return resp.StatusCode, res.Error
}

// Parameters on manual runs, on two replica processes: from the command
// (-param) they reach an exec job's environment, from the admin API an
// http job's headers; undeclared names, bad names and long values are
// refused by both with a clear error and nothing recorded or run; the
// history and the audit trail keep them; no value reaches the daemons'
// logs.
func TestParamsAgainstFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var heard []http.Header
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		heard = append(heard, r.Header.Clone())
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("report", "@yearly", "1s", `echo "$LOCKCRON_TRIGGER|$LOCKCRON_PARAM_CUSTOMER|$LOCKCRON_PARAM_DATE" >> report.log`,
			`params = ["customer", "date"]`)+
		execJob("plain", "@yearly", "1s", `echo ran >> plain.log`)+
		fmt.Sprintf(`
job "hook" {
  schedule = "@yearly"
  params   = ["customer"]
  http {
    url = %q
  }
}
`, hook.URL))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	api := "http://" + ps[0].admin

	// Refused, at the command and at the API: exit 1 or 400, a message
	// that says what is accepted, nothing counted.
	long := strings.Repeat("x", 4097)
	for _, c := range []struct {
		job  string
		args []string
		want string
	}{
		{"report", []string{"-param", "region=eu"}, `parameter "region" is not accepted: the job accepts customer, date`},
		{"report", []string{"-param", "Customer=42"}, `parameter "Customer": a name is made of a-z, 0-9 and _; the job accepts customer, date`},
		{"report", []string{"-param", "customer=" + long}, `parameter "customer": value of 4097 bytes: at most 4096`},
		{"plain", []string{"-param", "customer=42"}, `parameter "customer": the job accepts no parameters`},
	} {
		r := mustCLI(t, 1, dir, append([]string{"trigger", c.job, "-config", cfg}, c.args...)...)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("trigger %s %q: stderr %q, want %q", c.job, c.args, r.stderr, c.want)
		}
		k, v, _ := strings.Cut(c.args[1], "=")
		b, _ := json.Marshal(daemon.TriggerRequest{Params: map[string]string{k: v}})
		st, msg := postJSON(t, api+"/api/jobs/"+c.job+"/trigger", string(b))
		if st != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("POST trigger %s %s: %d %q, want 400 saying %q", c.job, b, st, msg, c.want)
		}
	}
	r := mustCLI(t, 2, dir, "trigger", "report", "-param", "customer", "-config", cfg)
	if !strings.Contains(r.stderr, `param "customer": not key=value`) {
		t.Errorf("trigger -param customer: stderr %q", r.stderr)
	}
	if st, msg := postJSON(t, api+"/api/jobs/report/trigger", `{"parameters": {}}`); st != http.StatusBadRequest || !strings.Contains(msg, "not a trigger request") {
		t.Errorf("POST trigger with an unknown field: %d %q, want 400", st, msg)
	}
	for _, body := range []string{`{"params": {}}garbage`, `{"params": {}} {}`, `{"params": {}}}`} {
		if st, msg := postJSON(t, api+"/api/jobs/report/trigger", body); st != http.StatusBadRequest || !strings.Contains(msg, "more after the JSON object") {
			t.Errorf("POST trigger %s: %d %q, want 400", body, st, msg)
		}
	}
	for _, j := range jobsJSON(t, dir, cfg) {
		if j.Fleet.Triggers != 0 {
			t.Errorf("job %s: %d triggers counted after refusals, want 0", j.Name, j.Fleet.Triggers)
		}
	}

	// From the command to an exec job.
	r = mustCLI(t, 0, dir, "trigger", "report", "-param", "customer=cust-secret-42", "-param", "date=2026-11-27", "-config", cfg)
	if !strings.Contains(r.stdout, "report: triggered") {
		t.Errorf("trigger printed %q", r.stdout)
	}
	testkit.Eventually(t, 20*time.Second, "the run of report", func() bool { return len(fileLines(t, dir+"/report.log")) == 1 })
	if l := fileLines(t, dir+"/report.log"); l[0] != "1|cust-secret-42|2026-11-27" {
		t.Errorf("the exec job saw %q, want 1|cust-secret-42|2026-11-27", l[0])
	}

	// From the API to an http job.
	if st, msg := postJSON(t, api+"/api/jobs/hook/trigger", `{"params": {"customer": "hook-secret-7"}}`); st != http.StatusOK {
		t.Fatalf("POST trigger hook: %d %s", st, msg)
	}
	testkit.Eventually(t, 20*time.Second, "the request of hook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heard) == 1
	})
	mu.Lock()
	if h := heard[0]; h.Get("Lockcron-Param-Customer") != "hook-secret-7" || h.Get("Lockcron-Trigger") != "1" {
		t.Errorf("the http job sent Lockcron-Param-Customer %q, Lockcron-Trigger %q", h.Get("Lockcron-Param-Customer"), h.Get("Lockcron-Trigger"))
	}
	mu.Unlock()

	// In the history (command and API) and in the audit trail.
	testkit.Eventually(t, 10*time.Second, "report's run in the history", func() bool {
		return strings.Contains(mustCLI(t, 0, dir, "history", "report", "-config", cfg).stdout, "manual #1 customer=cust-secret-42 date=2026-11-27")
	})
	testkit.Eventually(t, 10*time.Second, "hook's run in the API's history", func() bool {
		st, b, _ := httpDo(t, "GET", api+"/api/jobs/hook/runs", "")
		var runs []struct{ Params map[string]string }
		return st == 200 && json.Unmarshal(b, &runs) == nil && len(runs) == 1 && runs[0].Params["customer"] == "hook-secret-7"
	})
	notes := map[string]string{}
	for _, e := range auditCLI(t, dir, nil, "-config", cfg) {
		if e.Action == "trigger" {
			notes[e.Target] = e.Note
		}
	}
	if notes["report"] != `params {"customer":"cust-secret-42","date":"2026-11-27"}` || notes["hook"] != `params {"customer":"hook-secret-7"}` || len(notes) != 2 {
		t.Errorf("audit notes of the triggers: %q", notes)
	}
	if l := fileLines(t, dir+"/plain.log"); len(l) != 0 {
		t.Errorf("plain ran %d times, want none", len(l))
	}

	// Names in the logs, never values.
	named := false
	for _, p := range ps {
		out := p.logs.String()
		if strings.Contains(out, "secret") || strings.Contains(out, "2026-11-27") {
			t.Errorf("%s: a parameter's value reached the log:\n%s", p.name, out)
		}
		named = named || strings.Contains(out, `"params":["customer","date"]`)
	}
	if !named {
		t.Errorf("no daemon log names the parameters of report's run")
	}
}

// The status page's trigger form: a job with params gets a field for
// each; a value the job refuses shows the error and runs nothing; filled
// in and sent, the run gets them, and the job's history shows them.
func TestBrowserTriggerForm(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("report", "@yearly", "1s", `echo "$LOCKCRON_TRIGGER|$LOCKCRON_PARAM_CUSTOMER|$LOCKCRON_PARAM_DATE" >> report.log`,
			`params = ["customer", "date"]`)+
		execJob("tick", "@every 1s", "1s", `true`))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	base := "http://" + ps[0].admin
	ctx := newBrowser(t)
	open(t, ctx, base+"/")
	fields := eval[[]string](t, ctx, row("report")+`.querySelectorAll('form.trigger-form input').values().map(i => i.name).toArray()`)
	if strings.Join(fields, ",") != "customer,date" {
		t.Fatalf("report's trigger form has fields %q, want customer, date", fields)
	}
	if eval[bool](t, ctx, row("tick")+`.querySelector('form.trigger-form') !== null`) {
		t.Errorf("tick, which takes no params, has a trigger form")
	}

	// Refused: the error shows, nothing runs.
	input := func(name string) string {
		return fmt.Sprintf(`#jobs tr[data-job="report"] form.trigger-form input[name=%q]`, name)
	}
	eval[bool](t, ctx, `(document.querySelector('`+input("customer")+`').value = 'x'.repeat(4097), true)`)
	browse(t, ctx, "send a value too long", chromedp.Click(button("report", "trigger")))
	waitJS(t, ctx, "the page shows the refusal", msgHas("report: trigger failed", `parameter "customer": value of 4097 bytes: at most 4096`))

	// Filled in by typing, across the page's refreshes, and sent with Enter.
	eval[bool](t, ctx, `(document.querySelector('`+input("customer")+`').value = '', true)`)
	browse(t, ctx, "fill in the form",
		chromedp.SendKeys(chromedp.CSS(input("customer")), "cust 42"),
		chromedp.SendKeys(chromedp.CSS(input("date")), "2026-11-27"))
	// tick runs every second: the live part is swapped meanwhile.
	before := eval[string](t, ctx, row("tick")+`.innerHTML`)
	waitJS(t, ctx, "a refresh of the live part", row("tick")+`.innerHTML !== `+strconv.Quote(before))
	if v := eval[string](t, ctx, `document.querySelector('`+input("customer")+`').value`); v != "cust 42" {
		t.Fatalf("after a refresh the customer field holds %q, want what was typed", v)
	}
	browse(t, ctx, "send the form", chromedp.SendKeys(chromedp.CSS(input("date")), "\r"))
	waitJS(t, ctx, "the page says report was triggered", msgHas("report: triggered", "heard it"))
	testkit.Eventually(t, 20*time.Second, "the run of report", func() bool { return len(fileLines(t, dir+"/report.log")) == 1 })
	if l := fileLines(t, dir+"/report.log"); l[0] != "1|cust 42|2026-11-27" {
		t.Errorf("the run saw %q, want 1|cust 42|2026-11-27", l[0])
	}

	open(t, ctx, base+"/jobs/report")
	manual := `document.querySelector('#runs tr[data-trigger="1"]')`
	waitJS(t, ctx, "the manual run in report's history", manual+` && `+manual+`.dataset.outcome === 'ran'`)
	text := eval[string](t, ctx, manual+`.innerText`)
	for _, want := range []string{"manual #1", "customer=cust 42", "date=2026-11-27"} {
		if !strings.Contains(text, want) {
			t.Errorf("report's history row %q does not show %q", text, want)
		}
	}
}

// Without Redis the command sends the parameters to the daemon's admin API:
// the run gets them, and a refusal comes back as the command's error.
func TestParamsInMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `admin {
  listen = "127.0.0.1:0"
}
log {
  json = true
}
`+execJob("report", "@yearly", "1s", `echo "$LOCKCRON_TRIGGER|$LOCKCRON_PARAM_CUSTOMER" >> report.log`, `params = ["customer"]`))
	p := startReplica(t, dir, cfg, "solo")
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin}
	r := cliEnv(t, dir, env, "trigger", "report", "-param", "region=eu", "-config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "400 Bad Request") || !strings.Contains(r.stderr, `parameter "region" is not accepted: the job accepts customer`) {
		t.Errorf("trigger with an undeclared param: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cliEnv(t, dir, env, "trigger", "report", "-param", "customer=mem-7", "-config", cfg); r.code != 0 {
		t.Fatalf("trigger: exit %d %s", r.code, r.stderr)
	}
	testkit.Eventually(t, 20*time.Second, "the run of report", func() bool { return len(fileLines(t, dir+"/report.log")) == 1 })
	if l := fileLines(t, dir+"/report.log"); l[0] != "1|mem-7" {
		t.Errorf("the run saw %q, want 1|mem-7", l[0])
	}
	if es := auditCLI(t, dir, env, "-config", cfg); len(es) != 1 || es[0].Note != `params {"customer":"mem-7"}` {
		t.Errorf("audit: %+v; want the one trigger with its params", es)
	}
}

// A trigger of a job with params that no replica hears fails, saying that
// the request is recorded: it runs, first, with the job's next trigger
// that a replica hears.
func TestParamsUnheardRunsWithNext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("report", "@yearly", "1s", `echo "$LOCKCRON_TRIGGER|$LOCKCRON_PARAM_CUSTOMER" >> report.log`, `params = ["customer"]`))
	r := mustCLI(t, 1, dir, "trigger", "report", "-param", "customer=unheard", "-config", cfg)
	if !strings.Contains(r.stderr, "no replica heard it") || !strings.Contains(r.stderr, "it is recorded, and runs before the job's next trigger that a replica hears") {
		t.Errorf("trigger heard by none: stderr %q", r.stderr)
	}
	startReplica(t, dir, cfg, "solo")
	waitSubscribed(t, srv, 1)
	mustCLI(t, 0, dir, "trigger", "report", "-param", "customer=heard", "-config", cfg)
	testkit.Eventually(t, 30*time.Second, "both runs", func() bool { return len(fileLines(t, dir+"/report.log")) == 2 })
	if l := fileLines(t, dir+"/report.log"); l[0] != "1|unheard" || l[1] != "2|heard" {
		t.Errorf("runs %q; want 1|unheard, then 2|heard", l)
	}
}
