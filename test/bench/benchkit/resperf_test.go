package benchkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseResperf(t *testing.T) {
	out, err := os.ReadFile("testdata/resperf.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := ParseResperf(out)
	want := Resperf{MaxQPS: 13420, LostPct: 10.38, Sent: 140827, Done: 44696}
	if got != want {
		t.Errorf("ParseResperf = %+v, want %+v", got, want)
	}
	if z := ParseResperf([]byte("resperf: invalid option\n")); z != (Resperf{}) {
		t.Errorf("ParseResperf of an error = %+v, want zero", z)
	}
}

func TestStartStopTracksLiveCommands(t *testing.T) {
	cmd, lf, err := Command(t.TempDir(), t.TempDir()+"/sleep.log", "", "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	live.Lock()
	tracked := live.cmds[cmd]
	live.Unlock()
	if !tracked {
		t.Fatal("a started command is not tracked")
	}
	Stop(cmd)
	live.Lock()
	tracked = live.cmds[cmd]
	live.Unlock()
	if tracked {
		t.Error("a stopped command is still tracked")
	}
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("sleep 30 was not stopped by a signal: %v", cmd.ProcessState)
	}
}

func TestVersions(t *testing.T) {
	v := Versions("dnsperf", "/nonexistent/nsd", "unknown-tool")
	if !strings.HasPrefix(v, "Linux ") || !strings.Contains(v, "NSD ?") || strings.Contains(v, "unknown-tool") {
		t.Errorf("Versions = %q", v)
	}
	if _, err := exec.LookPath("dnsperf"); err == nil && strings.Contains(v, "dnsperf ?") {
		t.Errorf("dnsperf is installed but Versions = %q", v)
	}
}
