package daemon

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// printPerReplica lists, after `scheduler jobs`' table, the last outcome
// of each replica of the jobs that run on every replica (replicas =
// "all"), whose row in the table shows no fleet-wide outcome.
func printPerReplica(w io.Writer, views []JobJSON) error {
	var tw *tabwriter.Writer
	for _, v := range views {
		if v.Replicas == "" {
			continue
		}
		if tw == nil {
			fmt.Fprintln(w, "\nLast outcome per replica (replicas = \"all\"):")
			tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tREPLICA\tTICK\tOUTCOME\tENDED")
		}
		if len(v.PerReplica) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\tno run yet\t-\n", v.Name)
		}
		for _, r := range v.PerReplica {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, r.Replica, fmtTime(&r.Tick), r.Outcome, fmtTime(&r.End))
		}
	}
	if tw == nil {
		return nil
	}
	return tw.Flush()
}
