package config

import (
	"reflect"
	"testing"
)

// Every setting of a Config is either one the daemon reloads (the jobs) or
// one that needs a restart: a field added to Config later must be placed.
func TestEveryConfigFieldIsClassified(t *testing.T) {
	notSettings := map[string]bool{"Path": true, "Digest": true, "Jobs": true, "Warnings": true}
	restart := make(map[string]bool)
	for _, s := range restartSettings {
		restart[s.field] = true
	}
	for f := range reflect.TypeFor[Config]().Fields() {
		if !f.IsExported() {
			continue
		}
		if !notSettings[f.Name] && !restart[f.Name] {
			t.Errorf("Config.%s is neither reloaded nor in restartSettings: add it to one (digest.go)", f.Name)
		}
	}
}
