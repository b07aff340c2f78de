// Package faultproxy is a TCP proxy that injects network faults between
// Redis clients and a redis-server, for the fault suite and for tests.
//
// A Proxy listens on a loopback port and forwards each connection it accepts
// to one target address. While it runs, its setters add a round-trip delay
// (SetDelay), hold all traffic as a link that drops and later retransmits
// its packets would (SetBlackhole), close connections instead of delivering
// a reply, after the command has run on the server (SetDropReplies), and
// close every connection at once (KillConns). Each fault applies to the
// connections already open as well as to new ones.
//
// Each connection is served by two goroutines, one per direction, each of
// which reads its side and writes the data it has read, in order, to the
// other side once it is due. Close stops and waits for all of them.
package faultproxy
