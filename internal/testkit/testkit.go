// Package testkit holds the helpers that the project's tests share: waiting
// for a condition, a test's context, the processes below a process, and a
// sample read from Prometheus text. It is for tests only.
package testkit

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Eventually checks cond every 5ms until it holds, and fails the test,
// naming what, if it does not within the given time. It must be called
// from the test's goroutine.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Context returns a context that ends after a minute, or when the test
// ends: a bound on what a test waits for.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Descendants returns every living process below pid, read from /proc.
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(p); len(f) >= 2 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// AllGone reports whether every one of pids has exited (a zombie counts
// as gone).
func AllGone(pids []int) bool {
	for _, p := range pids {
		if f := statFields(p); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// statFields are the fields of /proc/pid/stat after the command's name
// (state, ppid, ...), or none if pid does not exist.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// pid (comm) state ppid ...: comm may hold spaces and parens.
	s := string(b)
	return strings.Fields(s[strings.LastIndex(s, ")")+1:])
}

// Metric reads Prometheus text: it sums the samples of the metric name
// whose labels include every one of labels (each `key="value"`), and
// reports whether there was one.
func Metric(text, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || rest == "" {
			continue
		}
		var lbls string
		switch rest[0] {
		case '{':
			lbls, rest, ok = strings.Cut(rest[1:], "}")
			if !ok {
				continue
			}
		case ' ':
		default:
			continue // another metric whose name starts with name
		}
		all := true
		for _, want := range labels {
			all = all && strings.Contains(","+lbls+",", ","+want+",")
		}
		f := strings.Fields(rest)
		if !all || len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}
