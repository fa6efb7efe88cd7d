package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// settle waits until every thread of process pid sleeps (none is running
// or runnable), seen twice 50 us apart, or until d has passed; it reports
// whether it saw that. Sending a query only to a settled server makes every
// query take the same path (an idle server woken by one packet) instead of
// racing the server's way to sleep after its previous reply, a race whose
// outcome depends on the machine's load; under valgrind's serialised
// threads a thread waiting for its turn is runnable, so "all sleep" means
// all are blocked in the kernel (epoll, futex, nanosleep).
func settle(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	seen := 0
	for time.Now().Before(deadline) {
		if allAsleep(pid) {
			if seen++; seen == 2 {
				return true
			}
		} else {
			seen = 0
		}
		time.Sleep(50 * time.Microsecond)
	}
	return false
}

// allAsleep is true when every task of pid is in state S (interruptible
// sleep) according to /proc/<pid>/task/<tid>/stat.
func allAsleep(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return false
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'S' {
			return false
		}
	}
	return true
}
