package config

import (
	"errors"
	"slices"
	"strconv"

	"github.com/lockcron/lockcron/scheduler"
)

// checkChains checks the jobs that follow others (after) as a whole, with
// scheduler.CheckChains: names that are no job, cycles, and parents that
// do not share a schedule, each at its job's after.
func (d *decoder) checkChains(cfg *Config) {
	sj := make([]scheduler.Job, len(cfg.Jobs))
	for i, j := range cfg.Jobs {
		sj[i] = j.Job
	}
	var fe *scheduler.FieldError
	for _, err := range unjoin(scheduler.CheckChains(sj)) {
		if !errors.As(err, &fe) {
			continue
		}
		i := slices.IndexFunc(d.raw.Jobs, func(b jobBlock) bool { return b.Name == fe.Job })
		d.errf([]string{"job", strconv.Itoa(i), "after"}, "%s", fe.Msg)
	}
}
