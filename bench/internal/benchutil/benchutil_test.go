package benchutil

import (
	"context"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseInfo(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=300,usec=1200,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|get:calls=2,usec=10,usec_per_call=5.00\r\n" +
		"\r\n# CPU\r\n" +
		"used_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\n" +
		"used_cpu_sys_main_thread:1.000000\r\nused_cpu_user_main_thread:0.125000\r\n"
	s, err := ParseInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"evalsha": 300, "config|get": 2}; !maps.Equal(s.Calls, want) {
		t.Errorf("Calls = %v, want %v", s.Calls, want)
	}
	if want := map[string]int64{"evalsha": 1200, "config|get": 10}; !maps.Equal(s.Usec, want) {
		t.Errorf("Usec = %v, want %v", s.Usec, want)
	}
	if s.RedisCPU != 1.75 {
		t.Errorf("RedisCPU = %v, want 1.75", s.RedisCPU)
	}
	if !s.HasMain || s.MainCPU != 1.125 || s.MainThreadCPU() != 1.125 {
		t.Errorf("MainCPU, HasMain, MainThreadCPU() = %v, %v, %v, want 1.125, true, 1.125", s.MainCPU, s.HasMain, s.MainThreadCPU())
	}
	old, err := ParseInfo("used_cpu_sys:1.5\r\nused_cpu_user:0.25\r\n") // Redis < 6.2
	if err != nil || old.HasMain || old.MainThreadCPU() != 1.75 {
		t.Errorf("without main-thread fields: HasMain %v, MainThreadCPU() %v, err %v; want false, 1.75, nil", old.HasMain, old.MainThreadCPU(), err)
	}
	if _, err := ParseInfo("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Error("ParseInfo of a bad count: no error")
	}
}

func TestParseProcStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	got := parseProcStat("cpu  100 20 30 5000 40 5 6 7 0 0")
	if want := 168 * time.Second / clockTicks; got != want {
		t.Errorf("parseProcStat = %v, want %v", got, want)
	}
	for _, line := range []string{"cpu0 1 2 3 4 5 6 7 8 9", "cpu 1 2 3", "cpu 1 x 3 4 5 6 7 8 9"} {
		if got := parseProcStat(line); got != 0 {
			t.Errorf("parseProcStat(%q) = %v, want 0", line, got)
		}
	}
}

func TestParsePidStat(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0"
	if got, ok := parsePidStat(line); !ok || got != 3*time.Second {
		t.Errorf("parsePidStat = %v, %v, want 3s, true", got, ok)
	}
	if _, ok := parsePidStat("4242 (x) S 1 2"); ok {
		t.Error("parsePidStat of a short line: ok")
	}
}

func TestCPUSince(t *testing.T) {
	before := Snapshot{InfoStats: InfoStats{RedisCPU: 1}, ProcCPU: time.Second, Machine: 10 * time.Second}
	after := Snapshot{InfoStats: InfoStats{RedisCPU: 1.5}, ProcCPU: 3 * time.Second, Machine: 14 * time.Second}
	redis, proc, other := after.CPUSince(before)
	if redis != 0.5 || proc != 2*time.Second || other != 1500*time.Millisecond {
		t.Errorf("CPUSince = %v, %v, %v, want 0.5, 2s, 1.5s", redis, proc, other)
	}
	after.Machine = 11 * time.Second // less than the other two: 0, not negative
	if _, _, other := after.CPUSince(before); other != 0 {
		t.Errorf("other = %v, want 0", other)
	}
	before.Machine = 0 // unreadable
	if _, _, other := after.CPUSince(before); other != -1 {
		t.Errorf("other = %v, want -1", other)
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []int64
		want float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25},
		{[]int64{1, 3}, 0.8},
		{[]int64{0, 0}, 0},
		{nil, 0},
	} {
		if got := Jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestErrorCounts(t *testing.T) {
	var e ErrorCounts
	e.Add(true, errors.New("fail 1"))
	e.Add(false, errors.New("err 1"))
	e.Add(true, errors.New("fail 2"))
	e.Add(false, errors.New("err 2"))
	e.Add(false, errors.New("err 3"))
	if e.Fails != 2 || e.Errs != 3 || e.FirstFail != "fail 1" || e.FirstErr != "err 1" {
		t.Errorf("ErrorCounts = %d %d %q %q, want 2 3 \"fail 1\" \"err 1\"", e.Fails, e.Errs, e.FirstFail, e.FirstErr)
	}
}

func TestMetricTable(t *testing.T) {
	tab := NewMetricTable("metric", []int{8, 32}, func(n int) string { return strings.Repeat("g", n/8) })
	tab.Row("double", func(n int) string { return time.Duration(2 * n).String() })
	var b strings.Builder
	tab.Write(&b)
	want := "" +
		"| metric |    g | gggg |\n" +
		"| ------ | ---: | ---: |\n" +
		"| double | 16ns | 64ns |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestFormatUsecPerCall(t *testing.T) {
	got := FormatUsecPerCall(map[string]int64{"get": 4, "evalsha": 10}, map[string]int64{"get": 2, "evalsha": 123, "info": 7})
	if want := "evalsha 12.3µs, get 0.5µs"; got != want {
		t.Errorf("FormatUsecPerCall = %q, want %q", got, want)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended ctx = %v, want context.Canceled", err)
	}
}
