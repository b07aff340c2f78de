package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds each connection's dial to the target.
const dialTimeout = 10 * time.Second

// readSize is the largest chunk a connection reads at once.
const readSize = 32 << 10

// longAgo is a read deadline in the past, set to interrupt a blocked Read.
var longAgo = time.Unix(1, 0)

// Proxy forwards TCP connections from its own loopback address to a target
// address, and injects faults into them on request. Its methods are safe for
// concurrent use; each setter takes effect at once on the connections already
// open as well as on new ones.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // ends when Close is called
	cancel context.CancelFunc
	wg     sync.WaitGroup // the acceptor and both goroutines of every connection

	halfDelay atomic.Int64 // added to each direction, in nanoseconds
	blackhole atomic.Bool

	mu       sync.Mutex
	closed   bool
	conns    map[*conn]struct{}
	dropProb float64
	rng      *rand.Rand

	accepted, dropped, killed, dialErrors atomic.Int64
}

// Stats counts what a Proxy has done since New.
type Stats struct {
	Accepted       int64 // connections accepted from clients
	Active         int64 // connections open now
	DroppedReplies int64 // chunks from the target not delivered, their connection closed instead (SetDropReplies)
	Killed         int64 // connections closed by KillConns
	DialErrors     int64 // connections closed because the target could not be dialled
}

// New returns a Proxy to target (host:port) that listens on 127.0.0.1 on a
// free port and accepts connections at once. A connection is dialled to
// target when it is accepted, or when a blackhole that was on then is lifted;
// if that dial fails, the client's connection is closed. New returns an error
// if it cannot listen. The caller must Close the Proxy.
func New(target string) (*Proxy, error) {
	if target == "" {
		return nil, errors.New("faultproxy: empty target address")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen for target %s: %w", target, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target: target,
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		conns:  make(map[*conn]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address, host:port on the loopback interface, that
// clients dial to reach the target through the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection without delivering the data
// it holds, and returns when every goroutine of the Proxy has ended. It
// returns the error of closing the listener, or nil if the Proxy was already
// closed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.snapshot()
	p.mu.Unlock()

	err := p.ln.Close()
	p.cancel()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: close listener %s: %w", p.Addr(), err)
	}
	return nil
}

// SetDelay adds rtt/2 to each direction of every connection; 0 or less adds
// none. The delay applies to each chunk as it is read: a chunk read at t is
// written at t+rtt/2, whatever the delay of the chunks before it, so
// throughput is not reduced; bytes keep their order, so a chunk never
// overtakes one read before it. A change applies to chunks read after it.
func (p *Proxy) SetDelay(rtt time.Duration) {
	p.halfDelay.Store(int64(max(rtt, 0) / 2))
}

// SetBlackhole turns the blackhole on or off. While it is on, nothing is
// delivered in either direction and nothing is closed: the data read is held,
// in order, and delivered when the blackhole is lifted, as on a link whose
// packets are dropped and retransmitted later. Connections accepted while it
// is on are not dialled to the target until it is lifted; their data is held
// too. A peer's close while it is on is delivered after the data held before
// it, once the blackhole is lifted.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	changed := p.blackhole.Swap(on) != on
	conns := p.snapshot()
	p.mu.Unlock()
	if changed && !on {
		for _, c := range conns {
			c.wake()
		}
	}
}

// SetDropReplies makes each chunk coming back from the target, when it is
// due for delivery, undelivered with probability prob: instead, both sides of
// its connection are closed at once, so the command has run on the server
// while the client sees its connection die. A prob of 0 or less (or NaN)
// turns this off; 1 or more drops every reply. The decisions come from a
// generator seeded with seed, one per chunk while prob > 0, so the same
// traffic meets the same decisions.
func (p *Proxy) SetDropReplies(prob float64, seed int64) {
	if math.IsNaN(prob) || prob < 0 {
		prob = 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropProb = min(prob, 1)
	p.rng = rand.New(rand.NewPCG(uint64(seed), 0x6661756c7470726f)) // "faultpro"
}

// KillConns closes every open connection at once, without delivering the
// data it holds, and returns how many it closed.
func (p *Proxy) KillConns() int {
	p.mu.Lock()
	conns := p.snapshot()
	p.mu.Unlock()
	n := 0
	for _, c := range conns {
		if c.closeCounting(&p.killed) {
			n++
		}
	}
	return n
}

// Stats returns the Proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := len(p.conns)
	p.mu.Unlock()
	return Stats{
		Accepted:       p.accepted.Load(),
		Active:         int64(active),
		DroppedReplies: p.dropped.Load(),
		Killed:         p.killed.Load(),
		DialErrors:     p.dialErrors.Load(),
	}
}

// snapshot returns the open connections. p.mu must be held.
func (p *Proxy) snapshot() []*conn {
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	return conns
}

// dropReply reports whether the next reply chunk is to be dropped.
func (p *Proxy) dropReply() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropProb > 0 && p.rng.Float64() < p.dropProb
}

// accept accepts connections until the listener is closed, and starts the
// client-to-target goroutine of each.
func (p *Proxy) accept() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			// A transient failure, such as running out of file descriptors:
			// retry after a pause that grows to a second, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		c := &conn{p: p, client: nc}
		c.ctx, c.cancel = context.WithCancel(p.ctx)
		c.c2s = newPipe(c, nc, nil, false)

		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.cancel()
			_ = nc.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.accepted.Add(1)
		p.wg.Add(1)
		p.mu.Unlock()
		go c.c2s.run()
	}
}

// conn is one proxied connection: the client's side, accepted by the proxy,
// and the target's side, dialled by it.
type conn struct {
	p      *Proxy
	client net.Conn
	ctx    context.Context // ends when the connection is closed
	cancel context.CancelFunc
	halves atomic.Int32 // directions that ended with a clean close
	c2s    *pipe        // client to target

	mu       sync.Mutex
	closed   bool
	upstream net.Conn // nil until dialled
	s2c      *pipe    // target to client; nil until dialled
}

// close closes both sides of c, unless it was already closed, and reports
// whether it did. Its goroutines then end without delivering what they hold.
func (c *conn) close() bool { return c.closeCounting(nil) }

// closeCounting is close that, if it closes c, also adds one to counter (if
// not nil) before either side is closed, so that the count is up to date by
// the time a peer sees the close.
func (c *conn) closeCounting(counter *atomic.Int64) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.closed = true
	up := c.upstream
	c.mu.Unlock()
	if counter != nil {
		counter.Add(1)
	}

	// Cancel first, so that the goroutines see their read and write errors
	// as the end of the connection.
	c.cancel()
	_ = c.client.Close()
	if up != nil {
		_ = up.Close()
	}
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return true
}

// wake makes both of c's goroutines look again at the proxy's settings.
func (c *conn) wake() {
	c.mu.Lock()
	s2c := c.s2c
	c.mu.Unlock()
	c.c2s.wake()
	if s2c != nil {
		s2c.wake()
	}
}

// dial connects c to the proxy's target and starts its target-to-client
// goroutine. It returns the target's side, or nil if c is closed, having
// closed c if the dial failed.
func (c *conn) dial() net.Conn {
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(c.ctx, "tcp", c.p.target)
	if err != nil {
		if c.ctx.Err() == nil {
			c.p.dialErrors.Add(1)
		}
		c.close()
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = up.Close()
		return nil
	}
	c.upstream = up
	c.s2c = newPipe(c, up, c.client, true)
	c.p.wg.Add(1)
	c.mu.Unlock()
	go c.s2c.run()
	return up
}

// chunk is data read from one side, due on the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe is one direction of a connection, served by one goroutine. It reads
// src into a queue of chunks and, between reads, writes the chunks that are
// due to dst. A read deadline set to the head chunk's due time lets the one
// goroutine do both without reading and writing in lockstep.
type pipe struct {
	c     *conn
	src   net.Conn
	dst   net.Conn // nil until the connection is dialled (client to target)
	reply bool     // the chunks are replies from the target
	wakec chan struct{}

	mu    sync.Mutex // orders woken against the read deadline
	woken bool
}

func newPipe(c *conn, src, dst net.Conn, reply bool) *pipe {
	return &pipe{c: c, src: src, dst: dst, reply: reply, wakec: make(chan struct{}, 1)}
}

// wake interrupts the pipe's wait, so that it looks at the settings again.
func (p *pipe) wake() {
	p.mu.Lock()
	p.woken = true
	_ = p.src.SetReadDeadline(longAgo)
	p.mu.Unlock()
	select {
	case p.wakec <- struct{}{}:
	default:
	}
}

// arm sets src's read deadline before a Read, and reports false instead if
// the pipe has been woken since its last look at the settings.
func (p *pipe) arm(deadline time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.woken {
		p.woken = false
		return false
	}
	_ = p.src.SetReadDeadline(deadline)
	return true
}

// run serves the pipe until its connection is closed or its source has ended
// and everything read from it has been delivered.
func (p *pipe) run() {
	defer p.c.p.wg.Done()
	px := p.c.p
	buf := make([]byte, readSize)
	var queue []chunk
	var readErr error // why src ended; nil while it is open
	for {
		if p.c.ctx.Err() != nil {
			return
		}
		open := !px.blackhole.Load()
		if open && p.dst == nil {
			if p.dst = p.c.dial(); p.dst == nil {
				return
			}
		}
		for open && len(queue) > 0 && !queue[0].due.After(time.Now()) {
			if open = !px.blackhole.Load(); !open {
				break
			}
			if p.reply && px.dropReply() {
				p.c.closeCounting(&px.dropped)
				return
			}
			if _, err := p.dst.Write(queue[0].data); err != nil {
				p.c.close()
				return
			}
			queue[0] = chunk{}
			queue = queue[1:]
		}
		if open && readErr != nil && len(queue) == 0 {
			p.finish(readErr)
			return
		}

		var deadline time.Time // none
		if open && len(queue) > 0 {
			deadline = queue[0].due
		}
		if readErr == nil {
			if !p.arm(deadline) {
				continue
			}
			n, err := p.src.Read(buf)
			if n > 0 {
				due := time.Now().Add(time.Duration(px.halfDelay.Load()))
				queue = append(queue, chunk{data: append([]byte(nil), buf[:n]...), due: due})
			}
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				readErr = err
			}
			continue
		}

		// src has ended: wait for the head chunk to be due, for a wake-up,
		// or for the connection to be closed.
		var timer *time.Timer
		var due <-chan time.Time
		if !deadline.IsZero() {
			timer = time.NewTimer(time.Until(deadline))
			due = timer.C
		}
		select {
		case <-due:
		case <-p.wakec:
		case <-p.c.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// finish passes on the end of src, after everything read before it has been
// delivered: a clean close becomes a close of dst's write side, and the
// connection is closed once both directions have ended so; any other error
// closes the connection.
func (p *pipe) finish(readErr error) {
	cw, ok := p.dst.(interface{ CloseWrite() error })
	if !errors.Is(readErr, io.EOF) || !ok || cw.CloseWrite() != nil {
		p.c.close()
		return
	}
	if p.c.halves.Add(1) == 2 {
		p.c.close()
	}
}
