package benchutil

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// InfoStats is what an INFO reply tells of the commands the server ran
// (its commandstats section) and of its CPU time (its cpu section).
type InfoStats struct {
	Calls, Usec map[string]int64 // calls and µs of server time per command ("evalsha", "config|get", ...)
	RedisCPU    float64          // used_cpu_sys + used_cpu_user, seconds; 0 without the cpu section
	// MainCPU is used_cpu_sys_main_thread + used_cpu_user_main_thread,
	// seconds, and HasMain tells whether the reply had them (Redis ≥ 6.2).
	MainCPU float64
	HasMain bool
}

// MainThreadCPU is the CPU time of the server's main thread, the one that
// runs every command and script, in seconds: MainCPU if the reply had the
// main-thread fields, else RedisCPU (the whole process).
//
// Unlike the usec of INFO commandstats it needs no bookkeeping of which
// command ran inside which: a script's inner commands are counted once, as
// part of the thread's time. It includes what commandstats leaves out (the
// reading and writing of the sockets, the event loop, serverCron).
func (s InfoStats) MainThreadCPU() float64 {
	if s.HasMain {
		return s.MainCPU
	}
	return s.RedisCPU
}

// ParseInfo reads an INFO reply: the calls and usec fields of its
// cmdstat_ lines, the sum of used_cpu_sys and used_cpu_user, and that of
// used_cpu_sys_main_thread and used_cpu_user_main_thread. Other lines are
// skipped; a number that does not parse is an error.
func ParseInfo(info string) (InfoStats, error) {
	s := InfoStats{Calls: map[string]int64{}, Usec: map[string]int64{}}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys", "used_cpu_user", "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				return s, fmt.Errorf("INFO cpu: %q: %w", line, err)
			}
			if strings.HasSuffix(name, "_main_thread") {
				s.MainCPU += v
				s.HasMain = true
			} else {
				s.RedisCPU += v
			}
			continue
		}
		name, ok = strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" && k != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			if k == "calls" {
				s.Calls[name] = n
			} else {
				s.Usec[name] = n
			}
		}
	}
	return s, nil
}

// Snapshot is what a benchmark reads at each edge of its measured window:
// the server's counters and CPU time, and this process's and the
// machine's CPU time, all at about the same instant.
type Snapshot struct {
	InfoStats
	ProcCPU time.Duration // this process, user + sys (ProcessCPU)
	Machine time.Duration // every CPU's busy time (MachineCPU); 0 if unreadable
}

// TakeSnapshot reads INFO commandstats and cpu in one call, so that the
// counts and the CPU are taken at the same instant, and right after it
// ProcessCPU and MachineCPU. It gives the server 5 s to answer. The one
// INFO call of a snapshot that falls inside a before/after pair is
// counted in the second: leave "info" out of the difference.
func TakeSnapshot(ctx context.Context, rdb *redis.Client) (Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return Snapshot{}, fmt.Errorf("INFO: %w", err)
	}
	s := Snapshot{ProcCPU: ProcessCPU(), Machine: MachineCPU()}
	s.InfoStats, err = ParseInfo(info)
	return s, err
}

// CPUSince is the CPU time from before to s: redis-server's (seconds),
// this process's, and that of the rest of the machine (its busy time less
// the other two, at least 0), or -1 if either snapshot could not read
// the machine's.
func (s Snapshot) CPUSince(before Snapshot) (redis float64, proc, other time.Duration) {
	redis = s.RedisCPU - before.RedisCPU
	proc = s.ProcCPU - before.ProcCPU
	other = -1
	if before.Machine > 0 && s.Machine > 0 {
		other = max(0, s.Machine-before.Machine-proc-time.Duration(redis*float64(time.Second)))
	}
	return redis, proc, other
}

// PidCPU is the user + system CPU time so far of the process pid (one
// of this program's children, say), from /proc/pid/stat, in clock ticks
// of 10 ms; ok is false if the process is gone or the file unreadable.
func PidCPU(pid int) (d time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parsePidStat(string(b))
}

// parsePidStat is utime + stime of a /proc/pid/stat line.
func parsePidStat(line string) (time.Duration, bool) {
	// pid (comm) state ppid ...: comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'; utime and stime are the
	// 14th and 15th fields, the 12th and 13th after it.
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// ProcessCPU is this process's user + system CPU time so far, or 0.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MachineCPU is the busy time of all CPUs since boot (user, nice, system,
// irq, softirq, steal), from the first line of /proc/stat, or 0. Less this
// process's and redis-server's CPU time, it tells how busy the rest of the
// machine was during a window.
func MachineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseProcStat(line)
}

// parseProcStat is the busy time of the "cpu" line of /proc/stat, or 0.
func parseProcStat(line string) time.Duration {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/stat: 100 on Linux.
const clockTicks = 100
