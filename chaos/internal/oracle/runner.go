package oracle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"
)

// BeatEvery is how often a run writes to the fenced resource.
const BeatEvery = 50 * time.Millisecond

// RunFromEnv builds a Run from the job's environment (os.Getenv or an http
// request's headers), given a lookup.
func RunFromEnv(get func(string) string) Run {
	token, _ := strconv.ParseInt(get("TOKEN"), 10, 64)
	attempt, _ := strconv.Atoi(get("ATTEMPT"))
	var id [8]byte
	_, _ = rand.Read(id[:])
	return Run{
		ID:      hex.EncodeToString(id[:]),
		Job:     get("JOB"),
		Tick:    get("TICK"),
		Trigger: get("TRIGGER"),
		Replica: get("REPLICA"),
		Token:   token,
		Attempt: attempt,
	}
}

// Hold plays one run: a Start write, a Beat every BeatEvery until hold has
// passed or stop is closed, and an End write with the outcome, which it
// returns. Writes go on after a refusal, so the checker sees the whole run.
func (o *Oracle) Hold(run Run, hold time.Duration, stop <-chan struct{}) (string, error) {
	ctx := context.Background()
	fenced := false
	acc, err := o.Write(ctx, run, Start, "")
	if err != nil {
		return "", err
	}
	fenced = fenced || !acc
	end := time.NewTimer(hold)
	defer end.Stop()
	beat := time.NewTicker(BeatEvery)
	defer beat.Stop()
	status := StatusOK
loop:
	for {
		select {
		case <-end.C:
			break loop
		case <-stop:
			status = StatusTerminated
			break loop
		case <-beat.C:
			acc, err := o.Write(ctx, run, Beat, "")
			if err != nil {
				return "", err
			}
			fenced = fenced || !acc
		}
	}
	if fenced && status == StatusOK {
		status = StatusFenced
	}
	acc, err = o.Write(ctx, run, End, status)
	if err != nil {
		return "", err
	}
	if !acc && status == StatusOK {
		status = StatusFenced
		// The End write itself was refused: record that outcome too.
		_, _ = o.Write(ctx, run, End, status)
	}
	return status, nil
}
