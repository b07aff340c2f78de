package daemon

import (
	"runtime/debug"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	lib := func(v string) *debug.Module { return &debug.Module{Path: libraryModule, Version: v} }
	vcs := []debug.BuildSetting{
		{Key: "-buildmode", Value: "exe"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "2fbb2b6a1c3d4e5f60718293a4b5c6d7e8f90a1b"},
		{Key: "vcs.time", Value: "2026-11-26T08:50:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{
			name: "installed from a release",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: commandModule, Version: "v0.5.0", Sum: "h1:x"},
				Deps: []*debug.Module{lib("v0.5.0")}},
			want: "v0.5.0 go1.26.8",
		},
		{
			name: "installed from a commit",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: commandModule, Version: "v0.5.1-0.20261126085000-2fbb2b6a1c3d"},
				Deps: []*debug.Module{lib("v0.5.0")}},
			want: "v0.5.1-0.20261126085000-2fbb2b6a1c3d (library v0.5.0) go1.26.8",
		},
		{
			name: "built in the workspace, with the commit",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: commandModule, Version: "(devel)"},
				Deps: []*debug.Module{lib("(devel)")}, Settings: vcs},
			want: "devel (commit 2fbb2b6a1c3d, 2026-11-26T08:50:00Z, modified) go1.26.8",
		},
		{
			name: "built in the workspace, clean tree",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: commandModule, Version: "(devel)"},
				Deps: []*debug.Module{lib("(devel)")}, Settings: append(vcs[:4:4], debug.BuildSetting{Key: "vcs.modified", Value: "false"})},
			want: "devel (commit 2fbb2b6a1c3d, 2026-11-26T08:50:00Z) go1.26.8",
		},
		{
			name: "built without VCS information",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: commandModule, Version: "(devel)"},
				Deps: []*debug.Module{lib("(devel)")}},
			want: "devel go1.26.8",
		},
		{
			name: "embedded, from releases",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
				Deps: []*debug.Module{{Path: commandModule, Version: "v0.5.0"}, lib("v0.5.2")}, Settings: vcs},
			want: "v0.5.0 (library v0.5.2) go1.26.8",
		},
		{
			name: "embedded, the command replaced by a directory",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
				Deps: []*debug.Module{{Path: commandModule, Version: "v0.5.0", Replace: &debug.Module{Path: "../lockcron/cmd/scheduler"}}, lib("v0.5.0")}},
			want: "devel (library v0.5.0) go1.26.8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := version(&tt.bi); got != tt.want {
				t.Errorf("version = %q, want %q", got, tt.want)
			}
		})
	}
}
