package execjob

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exitedOnItsOwn reports whether process pid, a child of this process, has
// exited, without reaping it (os/exec's Wait does that): a zombie, or
// already reaped.
func exitedOnItsOwn(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return true // reaped already
	}
	// With WNOHANG and no state change, Linux zeroes info.
	return err == nil && info.Signo != 0
}
