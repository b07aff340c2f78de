package scheduler_test

import "github.com/lockcron/lockcron/fleet"

// testPause is the pause the tests set: a note, no end.
var testPause = fleet.PauseInfo{By: "test", Note: "test"}
