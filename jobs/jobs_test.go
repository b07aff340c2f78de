package jobs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// safety bounds every test that waits for a ctx to end, so that a broken
// Timeout fails the test instead of hanging it.
const safety = 30 * time.Second

func nop(context.Context) error { return nil }

func TestRegisterValidation(t *testing.T) {
	tests := []struct {
		name    string
		regName string
		f       Func
		want    error // nil: Register succeeds
	}{
		{name: "ok", regName: "backup", f: nop},
		{name: "ok punctuation", regName: "db.backup-v2/nightly", f: nop},
		{name: "ok unicode", regName: "sauvegarde-été", f: nop},
		{name: "empty", regName: "", f: nop, want: ErrInvalid},
		{name: "space", regName: "back up", f: nop, want: ErrInvalid},
		{name: "leading space", regName: " backup", f: nop, want: ErrInvalid},
		{name: "tab", regName: "back\tup", f: nop, want: ErrInvalid},
		{name: "newline", regName: "backup\n", f: nop, want: ErrInvalid},
		{name: "no-break space", regName: "back\u00a0up", f: nop, want: ErrInvalid},
		{name: "NUL", regName: "back\x00up", f: nop, want: ErrInvalid},
		{name: "DEL", regName: "back\x7fup", f: nop, want: ErrInvalid},
		{name: "invalid utf-8", regName: "back\xffup", f: nop, want: ErrInvalid},
		{name: "nil func", regName: "backup", f: nil, want: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			err := r.Register(tt.regName, tt.f)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Register(%q) = %v, want nil", tt.regName, err)
				}
				if _, err := r.Lookup(tt.regName); err != nil {
					t.Errorf("Lookup(%q) after Register: %v", tt.regName, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Register(%q) = %v, want %v", tt.regName, err, tt.want)
			}
			if q := fmt.Sprintf("%q", tt.regName); !strings.Contains(err.Error(), q) {
				t.Errorf("error %q does not name %s", err, q)
			}
			if names := r.Names(); len(names) != 0 {
				t.Errorf("after a failed Register, Names() = %q, want none", names)
			}
		})
	}
}

func TestRegisterDuplicate(t *testing.T) {
	tests := []struct {
		name string
		r    *Registry
	}{
		{name: "NewRegistry", r: NewRegistry()},
		{name: "zero value", r: new(Registry)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errFirst, errSecond := errors.New("first"), errors.New("second")
			if err := tt.r.Register("backup", func(context.Context) error { return errFirst }); err != nil {
				t.Fatalf("first Register: %v", err)
			}
			err := tt.r.Register("backup", func(context.Context) error { return errSecond })
			if !errors.Is(err, ErrDuplicate) {
				t.Fatalf("second Register = %v, want ErrDuplicate", err)
			}
			if !strings.Contains(err.Error(), `"backup"`) {
				t.Errorf("error %q does not name the func", err)
			}
			f, err := tt.r.Lookup("backup")
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if got := f.Run(t.Context()); !errors.Is(got, errFirst) {
				t.Errorf("registered func returns %v, want the first func's %v", got, errFirst)
			}
		})
	}
}

func TestLookupNotFound(t *testing.T) {
	many := make([]string, 25)
	for i := range many {
		many[i] = fmt.Sprintf("job%02d", i)
	}
	tests := []struct {
		name     string
		known    []string
		lookup   string
		want     []string // names the message must list
		dontWant []string // names it must not list
	}{
		{name: "empty registry", lookup: "backup"},
		{name: "typo", known: []string{"report", "backup", "cleanup"}, lookup: "bakup",
			want: []string{"backup", "cleanup", "report"}},
		{name: "empty name", known: []string{"backup"}, lookup: "", want: []string{"backup"}},
		{name: "many names: the closest 10", known: append([]string{"zz-backup"}, many...), lookup: "zz-bakup",
			want: []string{"zz-backup"}, dontWant: []string{"job24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			for _, n := range tt.known {
				if err := r.Register(n, nop); err != nil {
					t.Fatal(err)
				}
			}
			f, err := r.Lookup(tt.lookup)
			if !errors.Is(err, ErrNotFound) || f != nil {
				t.Fatalf("Lookup(%q) = %p, %v; want nil, ErrNotFound", tt.lookup, f, err)
			}
			msg := err.Error()
			if q := fmt.Sprintf("%q", tt.lookup); !strings.Contains(msg, q) {
				t.Errorf("message %q does not name %s", msg, q)
			}
			for _, n := range tt.want {
				if !strings.Contains(msg, n) {
					t.Errorf("message %q does not suggest %q", msg, n)
				}
			}
			for _, n := range tt.dontWant {
				if strings.Contains(msg, n) {
					t.Errorf("message %q suggests %q", msg, n)
				}
			}
			// The suggestions come sorted, and at most 10 of them.
			_, list, _ := strings.Cut(msg, ": ")
			if i := strings.LastIndex(list, ": "); i >= 0 {
				list = strings.TrimSuffix(list[i+2:], ")")
				names := strings.Split(list, ", ")
				if len(names) > maxSuggestions {
					t.Errorf("message %q lists %d names, want at most %d", msg, len(names), maxSuggestions)
				}
				if !slices.IsSorted(names) {
					t.Errorf("message %q lists names unsorted", msg)
				}
			}
		})
	}
}

func TestLookupMessage(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"report", "backup", "cleanup"} {
		if err := r.Register(n, nop); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.Lookup("bakup")
	const want = `func "bakup": jobs: no such func (known: backup, cleanup, report)`
	if err == nil || err.Error() != want {
		t.Errorf("Lookup error = %v, want %s", err, want)
	}
	_, err = NewRegistry().Lookup("x")
	const wantEmpty = `func "x": jobs: no such func (none registered)`
	if err == nil || err.Error() != wantEmpty {
		t.Errorf("Lookup error = %v, want %s", err, wantEmpty)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name  string
		known []string
		want  []string
	}{
		{name: "none", known: nil, want: []string{}},
		{name: "one", known: []string{"a"}, want: []string{"a"}},
		{name: "sorted", known: []string{"report", "Backup", "backup", "cleanup", "a.b"},
			want: []string{"Backup", "a.b", "backup", "cleanup", "report"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRegistry()
			for _, n := range tt.known {
				if err := r.Register(n, nop); err != nil {
					t.Fatal(err)
				}
			}
			got := r.Names()
			if got == nil || !slices.Equal(got, tt.want) {
				t.Errorf("Names() = %#v, want %#v", got, tt.want)
			}
			if len(got) > 0 {
				got[0] = "mutated" // callers own the slice
			}
			if again := r.Names(); !slices.Equal(again, tt.want) {
				t.Errorf("Names() after changing the returned slice = %q, want %q", again, tt.want)
			}
		})
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	const workers, perWorker = 8, 50
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = make(map[string]int) // shared name -> successful Registers
	)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				own := fmt.Sprintf("w%d-%d", w, i)
				if err := r.Register(own, nop); err != nil {
					t.Errorf("Register(%q): %v", own, err)
				}
				if _, err := r.Lookup(own); err != nil {
					t.Errorf("Lookup(%q): %v", own, err)
				}
				// Every worker races for the same shared names.
				shared := fmt.Sprintf("shared-%d", i)
				switch err := r.Register(shared, nop); {
				case err == nil:
					mu.Lock()
					wins[shared]++
					mu.Unlock()
				case !errors.Is(err, ErrDuplicate):
					t.Errorf("Register(%q): %v", shared, err)
				}
				other := fmt.Sprintf("w%d-%d", (w+1)%workers, i) // there or not yet
				if _, err := r.Lookup(other); err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("Lookup(%q): %v", other, err)
				}
				if names := r.Names(); !slices.IsSorted(names) {
					t.Error("Names() not sorted")
				}
			}
		})
	}
	wg.Wait()
	if got, want := len(r.Names()), workers*perWorker+perWorker; got != want {
		t.Errorf("len(Names()) = %d, want %d", got, want)
	}
	for name, n := range wins {
		if n != 1 {
			t.Errorf("%q registered %d times", name, n)
		}
	}
	if len(wins) != perWorker {
		t.Errorf("%d shared names registered, want %d", len(wins), perWorker)
	}
}

func TestDefaultRegistry(t *testing.T) {
	saved := DefaultRegistry
	DefaultRegistry = NewRegistry()
	t.Cleanup(func() { DefaultRegistry = saved })
	const name = "backup"
	if err := Register(name, nop); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := Register(name, nop); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second Register = %v, want ErrDuplicate", err)
	}
	if _, err := Lookup(name); err != nil {
		t.Errorf("Lookup: %v", err)
	}
	if !slices.Contains(DefaultRegistry.Names(), name) {
		t.Errorf("DefaultRegistry.Names() = %q, missing %q", DefaultRegistry.Names(), name)
	}
	if _, err := Lookup(name + "-missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup of a missing name = %v, want ErrNotFound", err)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"backup", "backup", 0},
		{"bakup", "backup", 1},
		{"kitten", "sitting", 3},
		{"été", "ete", 2},
	}
	for _, tt := range tests {
		t.Run(tt.a+"/"+tt.b, func(t *testing.T) {
			if got := editDistance(tt.a, tt.b); got != tt.want {
				t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := editDistance(tt.b, tt.a); got != tt.want {
				t.Errorf("editDistance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

func TestRecover(t *testing.T) {
	errValue := errors.New("an error value")
	tests := []struct {
		name      string
		f         Func
		wantMsg   string
		wantValue func(any) bool
		wantIs    error // besides ErrPanic
		wantAsRT  bool  // errors.As finds a runtime.Error
	}{
		{
			name:      "string",
			f:         func(context.Context) error { panic("boom") },
			wantMsg:   "jobs: panic: boom",
			wantValue: func(v any) bool { return v == "boom" },
		},
		{
			name:      "error value",
			f:         func(context.Context) error { panic(errValue) },
			wantMsg:   "jobs: panic: an error value",
			wantValue: func(v any) bool { return v == errValue },
			wantIs:    errValue,
		},
		{
			name: "nil map write",
			f: func(context.Context) error {
				var m map[string]int
				m["x"] = 1
				return nil
			},
			wantMsg:   "jobs: panic: assignment to entry in nil map",
			wantValue: func(v any) bool { _, ok := v.(runtime.Error); return ok },
			wantAsRT:  true,
		},
		{
			name:      "panic(nil)",
			f:         func(context.Context) error { panic(nil) },
			wantMsg:   "jobs: panic: panic called with nil argument",
			wantValue: func(v any) bool { _, ok := v.(*runtime.PanicNilError); return ok },
			wantAsRT:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Chain(tt.f, Recover()).Run(t.Context())
			if !errors.Is(err, ErrPanic) {
				t.Fatalf("Run = %v, want ErrPanic", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Run = %v, want it to match %v", err, tt.wantIs)
			}
			var pe *PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("errors.As(%v, *PanicError) = false", err)
			}
			if !tt.wantValue(pe.Value) {
				t.Errorf("PanicError.Value = %#v", pe.Value)
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("Error() = %q, want %q", got, tt.wantMsg)
			}
			if len(pe.Stack) == 0 {
				t.Fatal("PanicError.Stack is empty")
			}
			if !strings.Contains(string(pe.Stack), "TestRecover") {
				t.Errorf("PanicError.Stack does not show the panicking test:\n%s", pe.Stack)
			}
			if detail := fmt.Sprintf("%+v", err); !strings.HasPrefix(detail, tt.wantMsg+"\n") ||
				!strings.Contains(detail, string(pe.Stack)) {
				t.Errorf("%%+v = %q, want the message and the stack", detail)
			}
			if plain := fmt.Sprintf("%v", err); plain != tt.wantMsg {
				t.Errorf("%%v = %q, want %q", plain, tt.wantMsg)
			}
			var rt runtime.Error
			if got := errors.As(err, &rt); got != tt.wantAsRT {
				t.Errorf("errors.As(err, runtime.Error) = %v, want %v", got, tt.wantAsRT)
			}
		})
	}
}

func TestRecoverPassesThrough(t *testing.T) {
	errOwn := fmt.Errorf("wrapped: %w", context.Canceled)
	tests := []struct {
		name string
		err  error
	}{
		{name: "nil", err: nil},
		{name: "error", err: errOwn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			var gotCtx context.Context
			err := Chain(Func(func(ctx context.Context) error { gotCtx = ctx; return tt.err }), Recover()).Run(ctx)
			if err != tt.err { // the very same error, not a wrapper
				t.Errorf("Run = %v, want %v unchanged", err, tt.err)
			}
			if gotCtx != ctx {
				t.Error("Recover did not pass ctx on as it is")
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	const d = 20 * time.Millisecond
	errOwn := errors.New("own error")
	tests := []struct {
		name string
		f    Func
		// wantTimeout: the error must wrap ErrTimeout and DeadlineExceeded.
		wantTimeout bool
		wantIs      error // the error must also match this
	}{
		{
			name:        "runner returns ctx.Err()",
			f:           func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			wantTimeout: true,
		},
		{
			name:        "runner returns context.Cause",
			f:           func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) },
			wantTimeout: true,
		},
		{
			name:        "runner returns its own error late",
			f:           func(ctx context.Context) error { <-ctx.Done(); return errOwn },
			wantTimeout: true,
			wantIs:      errOwn,
		},
		{
			// The runner takes no notice of ctx's error: it returns nil,
			// after the deadline.
			name:        "runner returns nil late",
			f:           func(ctx context.Context) error { <-ctx.Done(); return nil },
			wantTimeout: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), safety)
			defer cancel()
			var cause error
			start := time.Now()
			err := Chain(Func(func(ctx context.Context) error {
				err := tt.f(ctx)
				cause = context.Cause(ctx)
				return err
			}), Timeout(d)).Run(ctx)
			if elapsed := time.Since(start); elapsed > safety/2 {
				t.Fatalf("Run took %v: the timeout did not end ctx", elapsed)
			}
			if !errors.Is(cause, ErrTimeout) {
				t.Errorf("context.Cause in the runner = %v, want ErrTimeout", cause)
			}
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run = %v, want ErrTimeout and context.DeadlineExceeded", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Run = %v, want it to match %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), d.String()) {
				t.Errorf("Run = %v, want it to say the timeout %v", err, d)
			}
		})
	}
}

func TestTimeoutFastRunner(t *testing.T) {
	errOwn := errors.New("own error")
	tests := []struct {
		name string
		err  error
	}{
		{name: "nil", err: nil},
		{name: "error", err: errOwn},
		{name: "DeadlineExceeded of its own", err: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deadline bool
			err := Chain(Func(func(ctx context.Context) error {
				_, deadline = ctx.Deadline()
				return tt.err
			}), Timeout(time.Hour)).Run(t.Context())
			if err != tt.err {
				t.Errorf("Run = %v, want %v unchanged", err, tt.err)
			}
			if !deadline {
				t.Error("the runner's ctx has no deadline")
			}
		})
	}
}

func TestTimeoutParentEndsFirst(t *testing.T) {
	errLost := errors.New("lease lost")
	tests := []struct {
		name      string
		parent    func(context.Context) (context.Context, func())
		wantCause error
	}{
		{
			name: "cancelled with a cause",
			parent: func(ctx context.Context) (context.Context, func()) {
				ctx, cancel := context.WithCancelCause(ctx)
				cancel(errLost)
				return ctx, func() {}
			},
			wantCause: errLost,
		},
		{
			name: "earlier deadline",
			parent: func(ctx context.Context) (context.Context, func()) {
				return context.WithTimeout(ctx, 10*time.Millisecond)
			},
			wantCause: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.parent(t.Context())
			defer cancel()
			err := Chain(Func(func(ctx context.Context) error {
				<-ctx.Done()
				return context.Cause(ctx)
			}), Timeout(safety)).Run(ctx)
			if errors.Is(err, ErrTimeout) {
				t.Errorf("Run = %v, want no ErrTimeout: the parent ended the run", err)
			}
			if !errors.Is(err, tt.wantCause) {
				t.Errorf("Run = %v, want %v", err, tt.wantCause)
			}
		})
	}
}

func TestTimeoutNested(t *testing.T) {
	// The outer Timeout fires first; only it reports, once.
	ctx, cancel := context.WithTimeout(t.Context(), safety)
	defer cancel()
	err := Chain(Func(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}), Timeout(20*time.Millisecond), Timeout(safety)).Run(ctx)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if n := strings.Count(err.Error(), ErrTimeout.Error()); n != 1 {
		t.Errorf("Run = %q: says timed out %d times, want once", err, n)
	}
	if !strings.Contains(err.Error(), "20ms") {
		t.Errorf("Run = %q, want the outer timeout (20ms) named", err)
	}
}

func TestTimeoutDisabled(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			errOwn := errors.New("own error")
			var deadline bool
			err := Chain(Func(func(ctx context.Context) error {
				_, deadline = ctx.Deadline()
				return errOwn
			}), Timeout(d)).Run(t.Context())
			if deadline {
				t.Error("the runner's ctx has a deadline")
			}
			if err != errOwn {
				t.Errorf("Run = %v, want %v unchanged", err, errOwn)
			}
		})
	}
}

// record returns a Middleware that appends name+" in" and name+" out" to
// log around each run.
func record(log *[]string, name string) Middleware {
	return func(next Runner) Runner {
		return Func(func(ctx context.Context) error {
			*log = append(*log, name+" in")
			defer func() { *log = append(*log, name+" out") }()
			return next.Run(ctx)
		})
	}
}

func TestChain(t *testing.T) {
	tests := []struct {
		name string
		mw   func(log *[]string) []Middleware
		want []string
	}{
		{name: "none", mw: func(*[]string) []Middleware { return nil }, want: []string{"run"}},
		{name: "one", mw: func(l *[]string) []Middleware { return []Middleware{record(l, "a")} },
			want: []string{"a in", "run", "a out"}},
		{name: "mw[0] outermost", mw: func(l *[]string) []Middleware {
			return []Middleware{record(l, "a"), record(l, "b"), record(l, "c")}
		}, want: []string{"a in", "b in", "c in", "run", "c out", "b out", "a out"}},
		{name: "nil skipped", mw: func(l *[]string) []Middleware {
			return []Middleware{nil, record(l, "a"), nil}
		}, want: []string{"a in", "run", "a out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			errOwn := errors.New("own error")
			r := Chain(Func(func(context.Context) error {
				log = append(log, "run")
				return errOwn
			}), tt.mw(&log)...)
			if err := r.Run(t.Context()); err != errOwn {
				t.Errorf("Run = %v, want %v", err, errOwn)
			}
			if !slices.Equal(log, tt.want) {
				t.Errorf("calls = %q, want %q", log, tt.want)
			}
		})
	}
}

func TestNilRunners(t *testing.T) {
	tests := []struct {
		name string
		r    Runner
	}{
		{name: "nil Func", r: Func(nil)},
		{name: "Chain of nil", r: Chain(nil)},
		{name: "Recover of nil", r: Chain(nil, Recover())},
		{name: "Timeout of nil", r: Chain(nil, Timeout(time.Hour))},
		{name: "Timeout 0 of nil", r: Chain(nil, Timeout(0))},
		{name: "middleware returns nil", r: Chain(Func(nop), func(Runner) Runner { return nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.r.Run(t.Context()); !errors.Is(err, ErrInvalid) {
				t.Errorf("Run = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestInfo(t *testing.T) {
	tick := time.Date(2025, 3, 1, 4, 5, 0, 0, time.FixedZone("CET", 3600))
	info := Info{Job: "backup", Tick: tick, Lock: "job:backup", Token: 1740798300000000, Attempt: 2, Replica: "replica-1"}

	if _, ok := InfoFrom(t.Context()); ok {
		t.Error("InfoFrom of a ctx without Info reports ok")
	}
	ctx, cancel := context.WithCancel(WithInfo(t.Context(), info))
	cancel()
	got, ok := InfoFrom(ctx)
	if !ok || !reflect.DeepEqual(got, info) {
		t.Errorf("InfoFrom = %+v, %v; want %+v, true", got, ok, info)
	}

	want := []string{
		"LOCKCRON_JOB=backup",
		"LOCKCRON_TICK=2025-03-01T03:05:00Z",
		"LOCKCRON_TOKEN=1740798300000000",
		"LOCKCRON_REPLICA=replica-1",
		"LOCKCRON_ATTEMPT=2",
		"LOCKCRON_TRIGGER=",
	}
	if env := info.Env(); !slices.Equal(env, want) {
		t.Errorf("Env() = %q, want %q", env, want)
	}
	// A manual run: the same tick, told apart by its trigger number.
	manual := info
	manual.Trigger = 7
	want[len(want)-1] = "LOCKCRON_TRIGGER=7"
	if env := manual.Env(); !slices.Equal(env, want) {
		t.Errorf("manual run: Env() = %q, want %q", env, want)
	}
	// A backfill's run: its past tick, and LOCKCRON_BACKFILL=1 last.
	backfill := info
	backfill.Backfill = true
	want = append(want[:len(want)-1], "LOCKCRON_TRIGGER=", "LOCKCRON_BACKFILL=1")
	if env := backfill.Env(); !slices.Equal(env, want) {
		t.Errorf("backfill run: Env() = %q, want %q", env, want)
	}
}

func TestInfoEnvZero(t *testing.T) {
	want := []string{
		"LOCKCRON_JOB=",
		"LOCKCRON_TICK=0001-01-01T00:00:00Z",
		"LOCKCRON_TOKEN=0",
		"LOCKCRON_REPLICA=",
		"LOCKCRON_ATTEMPT=0",
		"LOCKCRON_TRIGGER=",
	}
	if env := (Info{}).Env(); !slices.Equal(env, want) {
		t.Errorf("Env() = %q, want %q", env, want)
	}
}
