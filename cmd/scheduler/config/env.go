package config

import (
	"fmt"
	"strings"
)

// EnvPrefix starts the names of the environment variables that override
// the file: LOCKCRON_LOG__LEVEL sets log.level.
const EnvPrefix = "LOCKCRON_"

// envLevel separates the levels of a setting's path in a variable's name.
const envLevel = "__"

// notSettings are LOCKCRON_ variables that are not settings: the run info
// that exec jobs get (jobs.Info.Env), and LOCKCRON_CONFIG, the config
// file's path for the command. They are ignored.
var notSettings = map[string]bool{
	"JOB": true, "TICK": true, "TOKEN": true, "REPLICA": true, "ATTEMPT": true, "TRIGGER": true,
	"CONFIG": true,
}

// envName is the variable that sets path.
func envName(path []string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, envLevel))
}

// envKey is the env provider's transform: it maps a variable to the koanf
// key it sets, or to "" to leave it out. Bad names are reported here.
func (d *decoder) envKey(name, value string) (string, any) {
	var path []string
	switch {
	case name == "REDIS_URL":
		if d.lookupEnv(envName([]string{"redis", "url"})) != "" {
			return "", nil // LOCKCRON_REDIS__URL wins
		}
		path = []string{"redis", "url"}
	case strings.HasPrefix(name, EnvPrefix):
		rest := name[len(EnvPrefix):]
		if notSettings[rest] {
			return "", nil
		}
		path = strings.Split(strings.ToLower(rest), envLevel)
	default:
		return "", nil
	}
	if value == "" {
		return "", nil // an empty variable counts as unset
	}
	if !d.envPathOK(name, path) {
		return "", nil
	}
	k := pathKey(path...)
	if prev, dup := d.env[k]; dup {
		d.envErrs = append(d.envErrs, &Error{Env: name, Field: strings.Join(path, "."),
			Msg: fmt.Sprintf("also set by %s: set one", prev)})
		return "", nil
	}
	d.env[k] = name
	return k, value
}

// envPathOK checks a variable's path against the schema.
func (d *decoder) envPathOK(name string, path []string) bool {
	s := schema
	for i, p := range path {
		field := strings.Join(path[:i+1], ".")
		child := s.keys[p]
		if child == nil {
			msg := fmt.Sprintf("%q is not a setting", field)
			if sug := suggest(p, s.names()); sug != "" {
				msg += fmt.Sprintf("; did you mean %s?", envName(append(path[:i:i], sug)))
			}
			if i == 0 {
				// Another program's variable, perhaps: warn, do not refuse.
				d.warns = append(d.warns, warning{&Error{Env: name, Msg: msg + " (ignored)"}})
				return false
			}
			d.envErrs = append(d.envErrs, &Error{Env: name, Field: field, Msg: msg})
			return false
		}
		switch child.shape {
		case labeledShape:
			d.envErrs = append(d.envErrs, &Error{Env: name, Field: field,
				Msg: "jobs cannot be set from the environment: edit the file"})
			return false
		case blockShape:
			if i == len(path)-1 {
				d.envErrs = append(d.envErrs, &Error{Env: name, Field: field,
					Msg: fmt.Sprintf("%s is a block: set its keys, such as %s", field, envName(append(path[:i+1:i+1], child.names()[0])))})
				return false
			}
			s = child
		default:
			if i < len(path)-1 {
				d.envErrs = append(d.envErrs, &Error{Env: name, Field: strings.Join(path, "."),
					Msg: fmt.Sprintf("%s is not a block", field)})
				return false
			}
		}
	}
	return true
}
