package core

import "errors"

// Sentinel errors. Match them with errors.Is: the errors returned carry the
// lock's name and, where there is one, the key at fault.
var (
	// ErrLocked: the lock is held by another owner and the wait (TryLock,
	// or WithWait) is over.
	ErrLocked = errors.New("lock: held by another owner")
	// ErrNotHeld: Unlock of a lease that no longer holds the lock.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLockLost: the lease ended without Unlock: another owner or nobody
	// holds the lock now, its fixed lease time passed, or no renewal
	// succeeded in time.
	ErrLockLost = errors.New("lock: lease lost")
	// ErrReleased: the lease ended by Unlock or Client.Close.
	ErrReleased = errors.New("lock: lease released")
	// ErrClosed: the Client is closed.
	ErrClosed = errors.New("lock: client closed")
	// ErrInvalid: a bad argument or option; nothing was sent to Redis.
	ErrInvalid = errors.New("lock: invalid argument")
	// ErrBadKey: a key where the lock lives holds something that is not a
	// lock (another type, or a hash without a TTL). The key is left as it is.
	ErrBadKey = errors.New("lock: key is not a lock")
	// ErrUpgrade: the write lock of an RWMutex was asked for on a context
	// that holds its read lock; waiting would deadlock. Nothing was sent.
	ErrUpgrade = errors.New("lock: a read lock cannot be upgraded to the write lock")
)
