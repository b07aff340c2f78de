package scheduler

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// MaxJitter is the longest Job.Jitter: a year (366 days).
const MaxJitter = 366 * 24 * time.Hour

// ParseJobSchedule reads spec as the Scheduler reads the Schedule of a job
// named name with the given Jitter: the H fields of spec are hashed from
// name, and every tick is moved by the job's jitter offset (see the package
// doc, "Spreading the load"). loc is the zone of a spec without CRON_TZ=
// (UTC if nil). It gives the same ticks for the same arguments on every
// machine and in every process. The error says what is wrong with spec or
// jitter (negative, or above MaxJitter); it does not wrap ErrInvalid. It
// is safe for concurrent use, and so is the Schedule it returns.
func ParseJobSchedule(name, spec string, jitter time.Duration, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case jitter < 0:
		return nil, fmt.Errorf("jitter %v is negative", jitter)
	case jitter > MaxJitter:
		return nil, fmt.Errorf("jitter %v is above MaxJitter (%v)", jitter, MaxJitter)
	}
	return parseJobSchedule(spec, name, jitter, loc)
}

// nameHash is a hash of parts that every replica computes alike, in every
// process and on every platform: the first 8 bytes of their SHA-256.
func nameHash(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// jitterHash is the hash of a job's name that places its ticks within
// their jitter: its fraction of 2^64 is the job's share of the room.
func jitterHash(name string) uint64 { return nameHash("lockcron/jitter", name) }

// jittered moves each tick b of base later by an offset: the fraction
// frac/2^64 of the room, which is the smaller of max and the time to the
// tick after b, truncated to the millisecond. An offset is thus in
// [0, max) and below the time to the next tick, so the moved ticks keep
// their order, each between its own tick and the next.
type jittered struct {
	base schedule
	max  time.Duration
	frac uint64
}

// offset is the offset of tick b, whose next tick is next (zero if none).
func (j jittered) offset(b, next time.Time) time.Duration {
	room := j.max
	if !next.IsZero() {
		room = min(room, next.Sub(b))
	}
	if room <= 0 {
		return 0
	}
	off, _ := bits.Mul64(j.frac, uint64(room)) // floor(frac × room / 2^64) < room
	return time.Duration(off).Truncate(time.Millisecond)
}

// at returns the moved tick b, or the zero time for none.
func (j jittered) at(b time.Time) time.Time {
	if b.IsZero() {
		return b
	}
	return b.Add(j.offset(b, j.base.Next(b)))
}

// Next returns the first moved tick strictly after t. The moved tick of
// the last base tick at or before t is after t only if that base tick is
// less than max before t: Next looks for it there, and otherwise takes the
// moved tick of the first base tick after t.
func (j jittered) Next(t time.Time) time.Time {
	if b, ok := j.lastBefore(t); ok {
		if e := j.at(b); e.After(t) {
			return e
		}
	}
	return j.at(j.base.Next(t))
}

// lastBefore returns the last base tick at or before t, if one is less
// than max before t. It steps through the base ticks from t-max, and
// where they are dense (max spans many of them) it bisects the time
// between the tick it reached and t, down to a second. (A cron schedule
// looks up to five years ahead: max, at most MaxJitter, keeps the search
// within that.)
func (j jittered) lastBefore(t time.Time) (time.Time, bool) {
	first := func(d time.Duration) (time.Time, bool) { // the first tick in (t-d, t]
		b := j.base.Next(t.Add(-d))
		return b, !b.IsZero() && !b.After(t)
	}
	b, ok := first(j.max)
	if !ok {
		return time.Time{}, false
	}
	for range 4 {
		n := j.base.Next(b)
		if n.IsZero() || n.After(t) {
			return b, true
		}
		b = n
	}
	// A tick in (t-hi, t], none in (t-lo, t].
	lo, hi := time.Duration(0), t.Sub(b)+time.Nanosecond
	for hi-lo > time.Second {
		mid := lo + (hi-lo)/2
		if c, ok := first(mid); ok {
			hi, b = mid, c
		} else {
			lo = mid
		}
	}
	for {
		n := j.base.Next(b)
		if n.IsZero() || n.After(t) {
			return b, true
		}
		b = n
	}
}

// A hashField is what H may pick from in one field of a cron spec.
type hashField struct {
	name   string
	lo, hi int // the field's range, for H(a-b)
	hashHi int // the top of the range of H and H/n: dom 28, so that every month has it
}

var (
	secondField = hashField{"second", 0, 59, 59}
	minuteField = hashField{"minute", 0, 59, 59}
	hourField   = hashField{"hour", 0, 23, 23}
	domField    = hashField{"day of month", 1, 31, 28}
	monthField  = hashField{"month", 1, 12, 12}
	dowField    = hashField{"day of week", 0, 6, 6}
)

// expandH rewrites the H forms of a cron spec's fields (without CRON_TZ=)
// to numbers, hashed from the job's name and the field: a spec without H,
// and a descriptor, come back as they are.
func expandH(fields, name string) (string, error) {
	if !strings.Contains(fields, "H") || strings.HasPrefix(fields, "@") {
		return fields, nil
	}
	fs := strings.Fields(fields)
	var kinds []hashField
	switch len(fs) {
	case 5:
		kinds = []hashField{minuteField, hourField, domField, monthField, dowField}
	case 6:
		kinds = []hashField{secondField, minuteField, hourField, domField, monthField, dowField}
	default:
		return fields, nil // the parser says what is wrong
	}
	if name == "" {
		return "", errors.New("H needs the job's name to hash: use ParseJobSchedule")
	}
	for i, f := range fs {
		if !strings.Contains(f, "H") {
			continue
		}
		parts := strings.Split(f, ",")
		for k, p := range parts {
			if !strings.HasPrefix(p, "H") {
				continue
			}
			v, err := kinds[i].expand(p, nameHash("lockcron/H", name, kinds[i].name))
			if err != nil {
				return "", fmt.Errorf("%s field %q: %s", kinds[i].name, p, err)
			}
			parts[k] = v
		}
		fs[i] = strings.Join(parts, ",")
	}
	return strings.Join(fs, " "), nil
}

// expand rewrites one H form of the field, with the field's hash h: H is
// one value of the field's range; H/n starts at h mod n and steps by n; H(a-b) and
// H(a-b)/n do the same within a-b.
func (f hashField) expand(p string, h uint64) (string, error) {
	lo, hi := f.lo, f.hashHi
	rest := p[1:]
	if r, ok := strings.CutPrefix(rest, "("); ok {
		inner, after, ok := strings.Cut(r, ")")
		if !ok {
			return "", errors.New("no closing parenthesis: write H(a-b)")
		}
		a, b, ok := strings.Cut(inner, "-")
		if !ok {
			return "", fmt.Errorf("%q is not a range a-b", inner)
		}
		var err error
		if lo, err = f.number(a); err != nil {
			return "", err
		}
		if hi, err = f.number(b); err != nil {
			return "", err
		}
		if lo > hi {
			return "", fmt.Errorf("%d-%d is not a range: %d is after %d", lo, hi, lo, hi)
		}
		rest = after
	}
	size := hi - lo + 1
	if rest == "" {
		return strconv.Itoa(lo + int(h%uint64(size))), nil
	}
	s, ok := strings.CutPrefix(rest, "/")
	if !ok {
		return "", errors.New("not one of H, H/n, H(a-b), H(a-b)/n")
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("step %q is not a number", s)
	case n < 1 || n > size:
		return "", fmt.Errorf("step %d is not from 1 to %d, the size of %d-%d", n, size, lo, hi)
	}
	start := lo + int(h%uint64(n))
	if start+n > hi {
		return strconv.Itoa(start), nil
	}
	return fmt.Sprintf("%d-%d/%d", start, hi, n), nil
}

// number reads a bound of H(a-b): a number in the field's range.
func (f hashField) number(s string) (int, error) {
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is not a number", s)
	case v < f.lo || v > f.hi:
		return 0, fmt.Errorf("%d is outside %d-%d", v, f.lo, f.hi)
	}
	return v, nil
}
