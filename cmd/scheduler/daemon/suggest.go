package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// suggest returns the name of names closest to s, if one is near enough to
// be a misspelling of it (config.Suggest).
func suggest(s string, names []string) string { return config.Suggest(s, names) }

// didYouMean is ` (did you mean "NAME"?)` for the name of names closest to
// s, or "" when none is near.
func didYouMean(s string, names []string) string {
	if n := suggest(s, names); n != "" {
		return fmt.Sprintf(" (did you mean %q?)", n)
	}
	return ""
}

// flagError is the error of a command line that pflag refused. An unknown
// flag gets a suggestion from the command's flags (its own and inherited
// ones): `jobs -confg x.hcl` is "unknown flag: --confg (did you mean
// -config?)".
func flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return usageError{err}
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s := suggest(ne.GetSpecifiedName(), names); s != "" {
		return usageError{fmt.Errorf("%w (did you mean -%s?)", err, s)}
	}
	return usageError{err}
}

// longFlags lets long flags be written with one dash, as Go's flag
// package allows (-config FILE): an argument of one dash and more than one
// letter before any "=" is a long flag, so that pflag does not read -confg
// as -c onfg (and then a misspelt flag is refused, with a suggestion).
// Shorthands take their value after a space or "=" (-c FILE, -n=5), or, for
// a number, right after the letter (-n5). Arguments after "--" are left
// alone, and so is the value of a flag given after a space, which may
// start with a dash (-until -5m, -note "-- see INC-1").
func longFlags(root *cobra.Command, args []string) []string {
	// The shorthands and names of the flags that take a value, of every
	// command.
	valued := map[byte]bool{}
	valuedName := map[string]bool{}
	var visit func(c *cobra.Command)
	visit = func(c *cobra.Command) {
		add := func(f *pflag.Flag) {
			if f.Shorthand != "" && f.NoOptDefVal == "" {
				valued[f.Shorthand[0]] = true
			}
			if f.NoOptDefVal == "" {
				valuedName[f.Name] = true
			}
		}
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(root)
	out := make([]string, len(args))
	value := false // a is the value of the flag before it
	for i, a := range args {
		out[i] = a
		if value {
			value = false
			continue
		}
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value = !eq && (valuedName[name] && len(name) > 1 || len(name) == 1 && valued[name[0]])
		if strings.HasPrefix(a, "--") {
			continue
		}
		if len(name) > 1 && !(valued[name[0]] && name[1] >= '0' && name[1] <= '9') {
			out[i] = "-" + a
		}
	}
	return out
}

// plainBools makes the help of every bool flag of c and its subcommands
// read "--json" rather than pflag's "--json[=true|false]": the flags still
// take no value, or one after "=".
func plainBools(c *cobra.Command) {
	c.InitDefaultHelpFlag()
	c.InitDefaultVersionFlag()
	fix := func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			if _, done := f.Value.(plainBool); !done {
				f.Value = plainBool{f.Value}
			}
		}
	}
	c.LocalFlags().VisitAll(fix)
	c.PersistentFlags().VisitAll(fix)
	c.Flags().VisitAll(fix)
	for _, sub := range c.Commands() {
		plainBools(sub)
	}
}

// plainBool is a bool flag's value without pflag's IsBoolFlag, which only
// adds "[=true|false]" to the help. The flag's NoOptDefVal ("true", set
// when it was defined) still lets it be given without a value.
type plainBool struct{ pflag.Value }
