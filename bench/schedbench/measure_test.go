package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestSplitCommands(t *testing.T) {
	for _, c := range []struct {
		name                string
		delta, sent         map[string]int64
		wantClient, wantLua map[string]int64
		wantBoth            []string
	}{
		{
			name:       "scripts only",
			delta:      map[string]int64{"evalsha": 10, "hset": 50, "info": 1, "subscribe": 2},
			wantClient: map[string]int64{"evalsha": 10, "subscribe": 2},
			wantLua:    map[string]int64{"hset": 50},
		},
		{
			name:       "a name clients send too",
			delta:      map[string]int64{"evalsha": 10, "hgetall": 7, "exists": 5},
			sent:       map[string]int64{"evalsha": 10, "hgetall": 5, "exists": 5},
			wantClient: map[string]int64{"evalsha": 10, "hgetall": 5, "exists": 5},
			wantLua:    map[string]int64{"hgetall": 2},
			wantBoth:   []string{"hgetall"},
		},
		{
			name:       "hooks counted more than the server (a send after the snapshot)",
			delta:      map[string]int64{"exists": 3},
			sent:       map[string]int64{"exists": 4},
			wantClient: map[string]int64{"exists": 3},
			wantLua:    map[string]int64{},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, lua, both := splitCommands(c.delta, c.sent)
			if !maps.Equal(client, c.wantClient) || !maps.Equal(lua, c.wantLua) || !slices.Equal(both, c.wantBoth) {
				t.Errorf("splitCommands = %v, %v, %v, want %v, %v, %v", client, lua, both, c.wantClient, c.wantLua, c.wantBoth)
			}
		})
	}
}

func TestClientSent(t *testing.T) {
	client := map[string]int64{"evalsha": 10, "subscribe": 2, "hgetall": 5}
	usec := map[string]int64{"evalsha": 150, "subscribe": 3, "hgetall": 9, "hset": 40}
	only, both := clientSent(client, usec)
	if only != 153 || both != 9 {
		t.Errorf("clientSent = %d, %d, want 153, 9", only, both)
	}
}

// TestInScriptsCoversTheScripts keeps inScripts in step with the lock's Lua
// scripts: a command a script calls but inScripts lacks would be counted as
// sent by clients.
func TestInScriptsCoversTheScripts(t *testing.T) {
	files, err := filepath.Glob("../../internal/core/scripts/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("the lock's scripts: %v (%d files)", err, len(files))
	}
	call := regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			if name := strings.ToLower(m[1]); !inScripts[name] {
				t.Errorf("%s calls %s, which inScripts lacks", filepath.Base(f), m[1])
			}
		}
	}
}
