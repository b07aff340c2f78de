package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// commandStats takes a snapshot of INFO commandstats and cpu: calls and
// microseconds of server time per command name ("evalsha", "config|get",
// ...), and the server's CPU time.
func commandStats(ctx context.Context, rdb *redis.Client) (benchutil.InfoStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return benchutil.InfoStats{}, fmt.Errorf("INFO commandstats cpu: %w", err)
	}
	return benchutil.ParseInfo(s)
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
