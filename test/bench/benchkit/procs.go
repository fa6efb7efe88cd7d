package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// live are the commands started with Start and not yet stopped with Stop.
var live = struct {
	sync.Mutex
	cmds map[*exec.Cmd]bool
}{cmds: map[*exec.Cmd]bool{}}

// Start starts cmd (as from Command) and remembers it until Stop, so that
// StopAllOnSignal can reach it.
func Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	live.Lock()
	live.cmds[cmd] = true
	live.Unlock()
	return nil
}

func forget(cmd *exec.Cmd) {
	live.Lock()
	delete(live.cmds, cmd)
	live.Unlock()
}

// StopAllOnSignal stops every command started with Start and not yet
// stopped (each in its own process group, so forked children too), runs
// cleanup, and exits when the program gets SIGINT, SIGTERM or SIGHUP:
// deferred stops do not run on a signal, and a benchmark's servers left
// running would skew the next one on the same cores.
func StopAllOnSignal(cleanup func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		live.Lock()
		cmds := make([]*exec.Cmd, 0, len(live.cmds))
		for c := range live.cmds {
			cmds = append(cmds, c)
		}
		live.Unlock()
		for _, c := range cmds {
			Stop(c)
		}
		if cleanup != nil {
			cleanup()
		}
		fmt.Fprintf(os.Stderr, "%s: %v: stopped %d processes\n", os.Args[0], sig, len(cmds))
		os.Exit(1)
	}()
}
