package core

// Ref is embedded, under an unexported alias, in lock.Client: it hands the
// engine of a lock.Client to the packages of this module built on it
// (fleet.New) without a method in lock's documented API.
type Ref struct{ C *Client }

// Core returns the engine.
func (r Ref) Core() *Client { return r.C }
