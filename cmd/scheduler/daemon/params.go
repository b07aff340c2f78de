package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// maxTriggerBody bounds the body of POST /api/jobs/{name}/trigger.
const maxTriggerBody = 1 << 20

// TriggerRequest is the body of POST /api/jobs/{name}/trigger: the
// parameters of the manual run, each a name the job declares (params in
// its block) with its value. The body may be left out.
type TriggerRequest struct {
	Params map[string]string `json:"params,omitempty"`
}

// triggerBody reads the parameters of a trigger request; its error says
// what is wrong with the body.
func triggerBody(r *http.Request) (map[string]string, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxTriggerBody))
	if err != nil {
		return nil, fmt.Errorf("body: %w (at most %d bytes)", err, maxTriggerBody)
	}
	var t TriggerRequest
	if len(strings.TrimSpace(string(b))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		err := dec.Decode(&t)
		if err == nil {
			if _, end := dec.Token(); end != io.EOF {
				err = fmt.Errorf("more after the JSON object, at byte %d", dec.InputOffset())
			}
		}
		if err != nil {
			return nil, fmt.Errorf(`body: not a trigger request, {"params": {"customer": "42"}}: %w`, err)
		}
	}
	return t.Params, nil
}

// unheardNote is what becomes of a trigger of job that no replica heard,
// after the error that says so: for a job with params the request is
// recorded, and runs first at the job's next trigger that is heard (the
// store runs them in order); other jobs' is lost.
func unheardNote(cfg *config.Config, job string) string {
	for _, j := range cfg.Jobs {
		if j.Name == job && len(j.Params) > 0 {
			return "; it is recorded, and runs before the job's next trigger that a replica hears (trigger again only for one more run)"
		}
	}
	return ""
}

// paramsNote is the audit note of a trigger with params: "params " and
// them as a JSON object; "" for none.
func paramsNote(params map[string]string) string {
	if len(params) == 0 {
		return ""
	}
	b, _ := json.Marshal(params) // a map of strings always marshals
	return "params " + string(b)
}

// parseParams reads the -param key=value flags of trigger.
func parseParams(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	params := make(map[string]string, len(flags))
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("param %q: not key=value", f)
		}
		if _, dup := params[k]; dup {
			return nil, fmt.Errorf("param %q: %s given twice", f, k)
		}
		params[k] = v
	}
	return params, nil
}

// paramCell is the most of a parameter's value that `scheduler history`
// shows in its TICK column, in characters (-json shows it whole).
const paramCell = 40

// paramsText is a manual run's params as `scheduler history` shows them
// after its number: " key=value ...", sorted by key, each value printable
// (control characters quoted) and cut to paramCell characters, … marking
// the cut; "" for none.
func paramsText(params map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := []rune(printable(params[k]))
		if len(v) > paramCell {
			v = append(v[:paramCell-1], '…')
		}
		b.WriteString(" " + k + "=" + string(v))
	}
	return b.String()
}
