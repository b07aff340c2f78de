package daemon

import (
	"runtime/debug"
	"strings"
)

// The modules whose versions Version reports.
const (
	commandModule = "github.com/lockcron/lockcron/cmd/scheduler"
	libraryModule = "github.com/lockcron/lockcron"
)

// Version is the version of the scheduler command in this binary, as its
// build information records it, followed by the Go version:
//
//   - installed from a release (go install
//     github.com/lockcron/lockcron/cmd/scheduler@v1.2.3), its module
//     version: "v1.2.3 go1.26.8";
//   - built from a checkout, "devel", with the commit, its time and whether
//     the tree had changes when the build recorded them (the vcs.revision,
//     vcs.time and vcs.modified settings; not with -buildvcs=false, nor in a
//     git worktree): "devel (commit 0123456789ab, 2026-11-26T09:00:00Z,
//     modified) go1.26.8".
//
// The library's version is added when it differs from the command's
// ("v1.2.3 (library v1.2.4) go1.26.8"). In a program that embeds the
// daemon, the versions are those of the modules that program requires, and
// its own commit is left out.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	cmd, lib := "", ""
	if bi.Main.Path == commandModule {
		cmd = modVersion(&bi.Main)
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case commandModule:
			cmd = modVersion(d)
		case libraryModule:
			lib = modVersion(d)
		}
	}
	var notes []string
	if bi.Main.Path == commandModule {
		var rev, at, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			notes = append(notes, "commit "+rev[:min(len(rev), 12)])
			if at != "" {
				notes = append(notes, at)
			}
			if modified == "true" {
				notes = append(notes, "modified")
			}
		}
	}
	if lib != "" && lib != cmd {
		notes = append(notes, "library "+lib)
	}
	v := cmd
	if v == "" {
		v = "devel"
	}
	if len(notes) > 0 {
		v += " (" + strings.Join(notes, ", ") + ")"
	}
	return v + " " + bi.GoVersion
}

// modVersion is m's version, or the version that replaces it: "devel" for
// a module built from a directory (a workspace, a replace by a path), whose
// version says nothing.
func modVersion(m *debug.Module) string {
	if m.Replace != nil {
		m = m.Replace
	}
	if m.Version == "" || m.Version == "(devel)" {
		return "devel"
	}
	return m.Version
}
