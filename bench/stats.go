package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// durations is a sample of latencies.
type durations []time.Duration

// pct returns the p-th percentile (0 < p ≤ 100) by nearest rank; ds must
// be sorted.
func (ds durations) pct(p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds))*p/100+0.999999) - 1
	i = max(0, min(i, len(ds)-1))
	return ds[i]
}

func (ds durations) max() time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func (ds durations) mean() time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// jain is Jain's fairness index (Σx)²/(n·Σx²): 1 when every goroutine
// got the same share, 1/n when one got everything.
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// cmdStats is a snapshot of INFO commandstats: calls and microseconds of
// server time per command name ("evalsha", "config|get", ...).
type cmdStats struct{ calls, usec map[string]int64 }

// commandStats takes a snapshot of INFO commandstats.
func commandStats(ctx context.Context, rdb *redis.Client) (cmdStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return cmdStats{}, fmt.Errorf("INFO commandstats: %w", err)
	}
	out := cmdStats{calls: map[string]int64{}, usec: map[string]int64{}}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			var m map[string]int64
			switch k {
			case "calls":
				m = out.calls
			case "usec":
				m = out.usec
			default:
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return cmdStats{}, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			m[name] = n
		}
	}
	return out, nil
}

// statsDelta is after − before, per command, without zero entries.
func statsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

func sum(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// formatCounts renders a per-command count map, largest first.
func formatCounts(m map[string]int64, per float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		if per > 0 {
			fmt.Fprintf(&b, "%s=%d(%.2f)", k, m[k], float64(m[k])/per)
		} else {
			fmt.Fprintf(&b, "%s=%d", k, m[k])
		}
	}
	return b.String()
}

// monitor reads the server's MONITOR stream on its own connection and
// counts, between two "INFO commandstats" marker commands, the commands
// that Lua scripts ran (source "lua"), per command. INFO commandstats also
// counts those calls, but the client never sent them; the difference is
// the number of commands the clients sent.
type monitor struct {
	conn net.Conn
	wg   sync.WaitGroup

	mu      sync.Mutex
	markers int
	lua     map[string]int64
	client  map[string]int64 // non-Lua commands seen (MONITOR hides admin commands)
	second  chan struct{}    // closed when the second marker is seen
	readErr error
}

const markerLine = `"info" "commandstats"`

func startMonitor(ctx context.Context, addr string) (*monitor, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("monitor: %w", err)
	}
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "+OK" {
		conn.Close()
		return nil, fmt.Errorf("monitor: unexpected reply %q: %v", line, err)
	}
	_ = conn.SetDeadline(time.Time{})
	m := &monitor{conn: conn, lua: map[string]int64{}, client: map[string]int64{}, second: make(chan struct{})}
	m.wg.Go(func() { m.read(r) })
	return m, nil
}

func (m *monitor) read(r *bufio.Reader) {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			m.mu.Lock()
			if !errors.Is(err, net.ErrClosed) {
				m.readErr = err
			}
			m.mu.Unlock()
			return
		}
		// +1700000000.123456 [0 127.0.0.1:5555] "cmd" "arg" ...
		s := string(line)
		open := strings.IndexByte(s, '[')
		end := strings.IndexByte(s, ']')
		if open < 0 || end < open {
			continue // the rest of a line longer than the buffer
		}
		src := s[open+1 : end]
		rest := s[end+1:]
		cmd := rest
		if q := strings.IndexByte(rest, '"'); q >= 0 {
			cmd = rest[q+1:]
			if q2 := strings.IndexByte(cmd, '"'); q2 >= 0 {
				cmd = cmd[:q2]
			}
		}
		isLua := strings.HasSuffix(src, " lua")
		m.mu.Lock()
		switch {
		case !isLua && strings.Contains(rest, markerLine):
			m.markers++
			if m.markers == 2 {
				close(m.second)
			}
		case m.markers == 1 && isLua:
			m.lua[strings.ToLower(cmd)]++
		case m.markers == 1:
			m.client[strings.ToLower(cmd)]++
		}
		m.mu.Unlock()
	}
}

// finish waits for the second marker, stops reading and returns the Lua
// and client commands counted between the markers.
func (m *monitor) finish() (lua, client map[string]int64, err error) {
	select {
	case <-m.second:
	case <-time.After(10 * time.Second):
		err = errors.New("monitor: second INFO marker not seen within 10s")
	}
	m.conn.Close()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && m.readErr != nil {
		err = fmt.Errorf("monitor: %w", m.readErr)
	}
	return m.lua, m.client, err
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}
