package daemon

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printChains prints, after `scheduler jobs`' table, each job that others
// follow or that follows others: its parents (with when) and children.
func printChains(w io.Writer, views []JobJSON) error {
	var rows []string
	for _, v := range views {
		if len(v.After) == 0 && len(v.Children) == 0 {
			continue
		}
		after, children := "-", "-"
		if len(v.After) > 0 {
			after = strings.Join(v.After, ", ") + " (on " + string(v.When) + ")"
		}
		if len(v.Children) > 0 {
			children = strings.Join(v.Children, ", ")
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\n", v.Name, after, children))
	}
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nJOB\tAFTER\tCHILDREN")
	for _, r := range rows {
		fmt.Fprint(tw, r)
	}
	return tw.Flush()
}

// scheduleText is a job's schedule as `scheduler jobs` and validate show
// it: "after a, b" for a job that follows others.
func scheduleText(schedule string, after []string) string {
	if schedule == "" && len(after) > 0 {
		return "after " + strings.Join(after, ", ")
	}
	return schedule
}
