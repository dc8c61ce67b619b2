// pause holds a pod's namespaces open, as the image containerd names for every pod sandbox does: it waits for
// SIGINT or SIGTERM and exits 0, and, as PID 1 of a shared PID namespace, reaps the orphans handed to it.
// With an argument it prints usage and exits 2 (upstream's pause prints its version for -v; nothing reads it).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause (takes no arguments; SIGINT or SIGTERM ends it)")
		os.Exit(2)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
