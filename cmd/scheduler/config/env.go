package config

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

const (
	// EnvPrefix starts the names of the environment variables that
	// override the file: LOCKCRON_LOG__LEVEL sets log.level.
	EnvPrefix = "LOCKCRON_"
	envLevel  = "__" // between the levels of a setting's path in a variable's name
	// envFile is the "file name" of a variable's setting: HCL's
	// diagnostics about it carry envFile and the variable's name.
	envFile = "\x00env "
)

// notSettings are LOCKCRON_ variables that are not settings, and are
// ignored: the run info that exec jobs get (jobs.Info.Env), and
// LOCKCRON_CONFIG, the config file's path for the command.
var notSettings = map[string]bool{"JOB": true, "TICK": true, "TOKEN": true, "REPLICA": true, "ATTEMPT": true, "TRIGGER": true, "CONFIG": true}

// envPath is the path a variable sets, as written: LOCKCRON_LOG__LEVEL is
// log.level; REDIS_URL is redis.url.
func envPath(name string) []string {
	if name == "REDIS_URL" {
		return []string{"redis", "url"}
	}
	return strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), envLevel)
}

// applyEnv decodes each LOCKCRON_ variable (and REDIS_URL) over the file:
// the variable becomes a body of HCL that holds its one setting, decoded
// by the same schema into the same structs, so that its value takes the
// place of the file's. An empty variable counts as unset.
func (d *decoder) applyEnv() {
	root, _ := gohcl.ImpliedBodySchema(&fileConfig{})
	known := func(name string) bool {
		return slices.ContainsFunc(root.Attributes, func(a hcl.AttributeSchema) bool { return a.Name == name }) ||
			slices.ContainsFunc(root.Blocks, func(b hcl.BlockHeaderSchema) bool { return b.Type == name })
	}
	for _, kv := range d.o.environ {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case value == "",
			name == "REDIS_URL" && d.lookupEnv(EnvPrefix+"REDIS__URL") != "", // that one wins
			!strings.HasPrefix(name, EnvPrefix) && name != "REDIS_URL",
			notSettings[strings.TrimPrefix(name, EnvPrefix)]:
			continue
		}
		path := envPath(name)
		field := strings.Join(path, ".")
		switch {
		case !known(path[0]):
			// Another program's variable, perhaps: warn, do not refuse.
			msg := "not a setting (ignored)"
			for _, dg := range gohcl.DecodeBody(envBody(name, path, value), nil, &fileConfig{}) {
				msg += ": " + dg.Detail
			}
			d.warns = append(d.warns, &Error{Env: name, Msg: msg})
			continue
		case path[0] == "job" || path[0] == "notify":
			d.errs = append(d.errs, &Error{Env: name, Field: path[0], Msg: "jobs cannot be set from the environment, nor notify blocks: edit the file"})
			continue
		case len(path) > 2 && path[0] == "admin" && path[1] == "token":
			d.errs = append(d.errs, &Error{Env: name, Field: "admin.token", Msg: "token blocks cannot be set from the environment: edit the file (each block's value_env names the variable that holds its token)"})
			continue
		}
		if prev := d.env[pathKey(path...)]; prev != "" && prev != name && len(envPath(prev)) == len(path) {
			d.errs = append(d.errs, &Error{Env: name, Field: field, Msg: "also set by " + prev + ": set one"})
			continue
		}
		d.env[pathKey(path...)] = name
		for n := 1; n < len(path); n++ { // a block that only the environment makes is at this variable
			if k := pathKey(path[:n]...); d.env[k] == "" && !d.set(path[:n]...) {
				d.env[k] = name
			}
		}
		d.addDiags(gohcl.DecodeBody(envBody(name, path, value), nil, &d.raw))
	}
}

// envBody is the HCL body that sets path to value: a list for
// redis.addrs (comma-separated; the one list outside jobs and notify
// blocks), else a string, which HCL converts to the setting's type.
func envBody(name string, path []string, value string) *hclsyntax.Body {
	r := hcl.Range{Filename: envFile + name, Start: hcl.InitialPos, End: hcl.InitialPos}
	val := cty.StringVal(value)
	if pathKey(path...) == pathKey("redis", "addrs") {
		var items []cty.Value
		for s := range strings.SplitSeq(value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, cty.StringVal(s))
			}
		}
		val = cty.ListValEmpty(cty.String)
		if len(items) > 0 {
			val = cty.ListVal(items)
		}
	}
	last := path[len(path)-1]
	b := &hclsyntax.Body{SrcRange: r, EndRange: r, Attributes: hclsyntax.Attributes{
		last: {Name: last, Expr: &hclsyntax.LiteralValueExpr{Val: val, SrcRange: r}, SrcRange: r, NameRange: r},
	}}
	for i := len(path) - 2; i >= 0; i-- {
		b = &hclsyntax.Body{SrcRange: r, EndRange: r, Blocks: hclsyntax.Blocks{
			{Type: path[i], Body: b, TypeRange: r, OpenBraceRange: r, CloseBraceRange: r},
		}}
	}
	return b
}
