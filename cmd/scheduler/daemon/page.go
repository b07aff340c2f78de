package daemon

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// The status page: server-rendered HTML (html/template, which escapes
// every value), a style sheet and one small script that calls the POST
// API for the buttons and refreshes the page's live part in place. All of
// it is embedded in the binary.

//go:embed web
var webFS embed.FS

// Status page settings.
const (
	// pageTimeout bounds the store reads of one page.
	pageTimeout = 5 * time.Second
	// stripRuns is how many outcomes a job's strip shows.
	stripRuns = 20
	// historyRuns is how many runs a page of a job's history shows by
	// default (?limit= changes it, up to maxRuns).
	historyRuns = 50
	// refreshEvery is how often the page refreshes its live part.
	refreshEvery = 3 * time.Second
)

// pages are the status page's templates: each page file with the layout.
var pages = parsePages("jobs.html", "job.html", "locks.html", "audit.html", "replicas.html")

func parsePages(names ...string) map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(pageFuncs).ParseFS(webFS, "web/layout.html", "web/parts.html"))
	out := make(map[string]*template.Template, len(names))
	for _, n := range names {
		out[n] = template.Must(template.Must(base.Clone()).ParseFS(webFS, "web/"+n))
	}
	return out
}

// pageRoutes adds the status page's routes to mux.
func (a *admin) pageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", a.pageReader("jobs.html", a.jobsPage))
	mux.HandleFunc("GET /jobs/{name}", a.pageReader("job.html", a.jobPage))
	mux.HandleFunc("GET /locks", a.pageReader("locks.html", a.locksPage))
	mux.HandleFunc("GET /audit", a.pageReader("audit.html", a.auditPage))
	mux.HandleFunc("GET /replicas", a.pageReader("replicas.html", a.replicasPage))
	mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		f := r.PathValue("file")
		if f != "style.css" && f != "page.js" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFileFS(w, r, webFS, "web/"+f)
	})
}

// pageData is what a page's template gets.
type pageData struct {
	Title   string
	Nav     string    // the nav entry to mark: "jobs", "locks", "audit" or "replicas"
	Replica string    // this replica's id
	Now     time.Time // when the page was rendered
	Refresh int64     // milliseconds between refreshes of the live part

	// ConfigDigest is the SHA-256 of the config file in effect, and
	// ConfigLoadedAt when it was loaded (at start, or by the last valid
	// reload); "" and the zero time if unknown.
	ConfigDigest   string
	ConfigLoadedAt time.Time

	// Connecting: the daemon waits for Redis; the page shows the jobs of
	// its config without their ledgers.
	Connecting bool
	// NeedToken: admin tokens are configured; the page asks for one.
	NeedToken bool
	// Locked says why the page shows no data: the request carried no
	// token, or a wrong one, and reads need one. The page shows the token
	// box and the reason; its script sends the token kept for the session
	// and swaps in the page.
	Locked string
	// ActRefused says why this viewer's buttons would be refused (no
	// token is set and the page is not viewed from loopback); "" if not.
	ActRefused string
	// Error is a failure to show in place of the page's content.
	Error string

	Jobs []jobRow // the jobs page; the job page's one job

	// The job page.
	Runs   []runRow
	Before string // the runs are older than this run; "" for the newest
	Older  string // the ?before= of the next page; "" if there is none
	Limit  int    // the runs per page, if not the default
	Known  []string

	// The locks page.
	Locks []LockJSON

	// The audit page (paged with Before, Older and Limit).
	Audit []AuditEntry

	// The replicas page.
	Replicas []ReplicaJSON

	// Backfills are the job page's job's running backfills (backfill.go).
	Backfills []scheduler.Backfill
}

// jobRow is a job on the jobs page.
type jobRow struct {
	JobJSON
	Loc     *time.Location // the schedule's zone
	Last    *runRow        // the newest run in the history
	Strip   []runRow       // the latest runs, oldest first
	HistErr string         // the history could not be read
}

// runRow is a run in a strip or a history table.
type runRow struct {
	scheduler.Run
	Loc *time.Location
}

func (a *admin) page(w http.ResponseWriter, r *http.Request, status int, name string, d *pageData) {
	d.Now = time.Now()
	d.Refresh = refreshEvery.Milliseconds()
	d.NeedToken = len(a.access.tokens) > 0
	if d.Locked == "" { // a locked page shows nothing of the daemon
		d.Replica = a.locks.ID()
		if a.reload != nil {
			st := a.reload.current()
			d.ConfigDigest, d.ConfigLoadedAt = st.Digest, st.LoadedAt
		}
	}
	if !d.NeedToken && !loopbackAddr(r.RemoteAddr) {
		d.ActRefused = "The buttons work only from this machine: no admin token is set, so the daemon takes trigger, pause and resume only from loopback. Add a token to the admin block to use them from elsewhere."
	}
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		a.log.Error("status page not rendered", "page", name, "error", err)
		http.Error(w, "the status page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pageReader wraps a page: it needs a read token when tokens are
// configured (unless admin.public_read). Refused, it answers the page
// (name) locked: the token box and the reason, no data.
func (a *admin) pageReader(name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, status, reason := a.access.authorize(r, config.ScopeRead, "the status page")
		if status != http.StatusOK {
			a.refused(w, r, config.ScopeRead, status, reason)
			a.page(w, r, status, name, &pageData{Title: "token needed", Locked: reason})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), actorKey{}, who)))
	}
}

// connecting fills d with the jobs of the config, without their ledgers,
// while the daemon waits for Redis.
func (a *admin) connecting(d *pageData) {
	d.Connecting = true
	if a.s == nil {
		return
	}
	for _, st := range a.s.Status() {
		d.Jobs = append(d.Jobs, jobRow{JobJSON: JobJSON{Name: st.Job, Schedule: st.Schedule, Zone: st.Zone, Lock: st.Lock}, Loc: zoneLoc(st.Zone)})
	}
}

func (a *admin) jobsPage(w http.ResponseWriter, r *http.Request) {
	d := &pageData{Title: "jobs", Nav: "jobs"}
	if !a.ready() {
		a.connecting(d)
		a.page(w, r, http.StatusServiceUnavailable, "jobs.html", d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	d.Jobs = a.jobRows(ctx, a.s.Jobs(ctx))
	a.page(w, r, http.StatusOK, "jobs.html", d)
}

// jobRows reads the latest runs of each job.
func (a *admin) jobRows(ctx context.Context, views []scheduler.JobView) []jobRow {
	js := a.withConfig(JobsJSON(views))
	rows := make([]jobRow, len(views))
	for i, v := range views {
		row := jobRow{JobJSON: js[i], Loc: zoneLoc(v.Zone)}
		runs, err := a.s.History(ctx, v.Job, stripRuns, "")
		if err != nil {
			row.HistErr = err.Error()
		}
		for j := len(runs) - 1; j >= 0; j-- {
			row.Strip = append(row.Strip, runRow{Run: runs[j], Loc: row.Loc})
		}
		if len(runs) > 0 {
			row.Last = &row.Strip[len(row.Strip)-1]
		}
		rows[i] = row
	}
	return rows
}

func (a *admin) jobPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d := &pageData{Title: name, Nav: "jobs", Known: a.jobNames()}
	if !a.ready() {
		a.connecting(d)
		a.page(w, r, http.StatusServiceUnavailable, "job.html", d)
		return
	}
	if !slices.Contains(d.Known, name) {
		d.Error = a.unknownJob(name)
		a.page(w, r, http.StatusNotFound, "job.html", d)
		return
	}
	limit, before, err := runsQuery(r, historyRuns)
	if err != nil {
		d.Error = err.Error()
		a.page(w, r, http.StatusBadRequest, "job.html", d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	v, ok := a.view(ctx, name)
	if !ok {
		d.Error = a.unknownJob(name)
		a.page(w, r, http.StatusNotFound, "job.html", d)
		return
	}
	d.Jobs = a.jobRows(ctx, []scheduler.JobView{v})
	d.Backfills = a.runningBackfills(ctx, name)
	d.Before = before
	if limit != historyRuns {
		d.Limit = limit
	}
	runs, err := a.s.History(ctx, name, limit, before)
	if err != nil {
		d.Error = "the run history could not be read: " + err.Error()
		a.page(w, r, http.StatusBadGateway, "job.html", d)
		return
	}
	loc := d.Jobs[0].Loc
	for _, run := range runs {
		d.Runs = append(d.Runs, runRow{Run: run, Loc: loc})
	}
	if len(runs) == limit {
		d.Older = runs[len(runs)-1].ID
	}
	a.page(w, r, http.StatusOK, "job.html", d)
}

func (a *admin) locksPage(w http.ResponseWriter, r *http.Request) {
	d := &pageData{Title: "locks", Nav: "locks"}
	if !a.ready() {
		d.Connecting = true
		a.page(w, r, http.StatusServiceUnavailable, "locks.html", d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	ls, err := a.locks.Locks(ctx)
	if err != nil {
		d.Error = "the locks could not be listed: " + err.Error()
		a.page(w, r, http.StatusBadGateway, "locks.html", d)
		return
	}
	d.Locks = LocksJSON(ls)
	a.page(w, r, http.StatusOK, "locks.html", d)
}

// zones caches time.LoadLocation, which reads the zone database each time.
var zones sync.Map // string → *time.Location

// zoneLoc is the location of a job's zone; UTC if it cannot be loaded.
func zoneLoc(zone string) *time.Location {
	if l, ok := zones.Load(zone); ok {
		return l.(*time.Location)
	}
	l, err := time.LoadLocation(zone)
	if err != nil {
		l = time.UTC
	}
	zones.Store(zone, l)
	return l
}

// An outcome's look on the page: a mark that reads without colour, a
// class that colours it, and a word.
type outcomeLook struct{ Mark, Class, Word string }

var outcomeLooks = map[scheduler.Outcome]outcomeLook{
	scheduler.OutcomeRan:            {"✓", "ok", "ran"},
	scheduler.OutcomeFailed:         {"✗", "bad", "failed"},
	scheduler.OutcomeError:          {"!", "bad", "error"},
	scheduler.OutcomeLostLock:       {"L", "warn", "lost the lock"},
	scheduler.OutcomeInterrupted:    {"I", "warn", "interrupted"},
	scheduler.OutcomeHandedOff:      {"H", "info", "handed off"},
	scheduler.OutcomeMissed:         {"M", "muted", "missed"},
	scheduler.OutcomeDeadlineMissed: {"D", "warn", "start deadline missed"},
	scheduler.OutcomeSkippedDone:    {"S", "muted", "skipped: done"},
	scheduler.OutcomeSkippedBusy:    {"B", "muted", "skipped: busy"},
	scheduler.OutcomePaused:         {"P", "muted", "paused"},
	scheduler.OutcomeExcluded:       {"X", "muted", "excluded"},
	scheduler.OutcomeReplaced:       {"R", "warn", "replaced"},
}

func lookOf(outcome scheduler.Outcome) outcomeLook {
	if l, ok := outcomeLooks[outcome]; ok {
		return l
	}
	if outcome == "" {
		return outcomeLook{"·", "muted", "none"}
	}
	return outcomeLook{"?", "muted", string(outcome)}
}

// rowArgs is what the jobrow template gets: the page and one job.
type rowArgs struct {
	P *pageData
	J jobRow
}

// tickText is a tick in a list of next ticks.
type tickText struct{ ISO, Text string }

// timeOf reads a time.Time or a *time.Time (nil: the zero time).
func timeOf(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

var pageFuncs = template.FuncMap{
	"rowArgs": func(p *pageData, j jobRow) rowArgs { return rowArgs{P: p, J: j} },
	"look":    lookOf,
	// legend is the looks of the outcomes a history holds.
	"legend": func() []outcomeLook {
		var out []outcomeLook
		for _, o := range []scheduler.Outcome{scheduler.OutcomeRan, scheduler.OutcomeFailed, scheduler.OutcomeLostLock, scheduler.OutcomeInterrupted, scheduler.OutcomeHandedOff, scheduler.OutcomeMissed,
			scheduler.OutcomeDeadlineMissed, scheduler.OutcomeSkippedBusy, scheduler.OutcomePaused} {
			out = append(out, lookOf(o))
		}
		return out
	},
	"jobURL": func(name string) string { return "/jobs/" + url.PathEscape(name) },
	// at shows a time in loc, to the second, with the zone's abbreviation.
	"at": func(v any, loc *time.Location) string {
		t := timeOf(v)
		if t.IsZero() {
			return "—"
		}
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	},
	"atp": func(v any, loc *time.Location) string { return timeOf(v).In(loc).Format("2006-01-02 15:04:05 MST") },
	"utc": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	// clock is a time of day in loc.
	"clock": func(v any, loc *time.Location) string { return timeOf(v).In(loc).Format("15:04:05") },
	// iso is a time for a datetime attribute.
	"iso": func(v any) string { return timeOf(v).UTC().Format(time.RFC3339Nano) },
	// next lists ticks in loc: each without its date while that stays
	// today's or the previous tick's, the first with the zone.
	"next": func(now time.Time, ts []time.Time, loc *time.Location) []tickText {
		out := make([]tickText, len(ts))
		day := now.In(loc).Format(time.DateOnly)
		for i, t := range ts {
			t = t.In(loc)
			layout := "15:04:05"
			if t.Format(time.DateOnly) != day {
				layout = "2006-01-02 15:04:05"
			}
			if i == 0 {
				layout += " MST"
			}
			day = t.Format(time.DateOnly)
			out[i] = tickText{ISO: t.UTC().Format(time.RFC3339Nano), Text: t.Format(layout)}
		}
		return out
	},
	// more is " +N more" when a replica lists shown of total (moreOf).
	"more": moreOf,
	// ago is how long before now a time was: "4s ago".
	"ago": func(now time.Time, v any) string {
		t := timeOf(v)
		if t.IsZero() {
			return ""
		}
		d := now.Sub(t)
		switch {
		case d < 0:
			return "in " + roundDur(-d)
		case d < time.Second:
			return "just now"
		}
		return d.Round(time.Second).String() + " ago"
	},
	// dur is a run's duration, rounded for reading.
	"dur": func(d time.Duration) string {
		switch {
		case d < time.Millisecond:
			return d.Round(time.Microsecond).String()
		case d < time.Second:
			return d.Round(time.Millisecond).String()
		}
		return d.Round(10 * time.Millisecond).String()
	},
	// replica is the replica part of an owner id: the lock Client's ID
	// (the replica id), its instance and a number, joined by colons.
	"replica": func(owner string) string {
		parts := strings.Split(owner, ":")
		if len(parts) < 3 {
			return owner
		}
		return strings.Join(parts[:len(parts)-2], ":")
	},
	"plural": func(n int64, one, many string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, many)
	},
	// tally counts a strip's outcomes: "18 ran, 2 failed".
	"tally": func(runs []runRow) string {
		var order []string
		n := map[string]int{}
		for _, r := range runs {
			w := lookOf(r.Outcome).Word
			if n[w] == 0 {
				order = append(order, w)
			}
			n[w]++
		}
		parts := make([]string, len(order))
		for i, w := range order {
			parts[i] = fmt.Sprintf("%d %s", n[w], w)
		}
		return strings.Join(parts, ", ")
	},
	"ms": func(ms int64) string { return roundDur(time.Duration(ms) * time.Millisecond) },
	// short is the start of a digest, for reading.
	"short": func(digest string) string {
		if len(digest) > 12 {
			return digest[:12]
		}
		return digest
	},
}

// roundDur rounds d for reading: to the second above a minute, else to
// the 100ms above a second, else to the millisecond.
func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
