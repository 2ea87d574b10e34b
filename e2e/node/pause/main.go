// pause holds a Pod's namespaces for the container runtime, as the upstream
// pause image does (kubernetes build/pause/linux/pause.c): it waits for a
// signal, exits 0 on SIGINT or SIGTERM and reaps the children it inherits as
// PID 1 of a Pod that shares its process namespace. Static (CGO_ENABLED=0), so
// its image needs nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
