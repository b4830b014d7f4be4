// Command pause holds a pod's namespaces open, as Kubernetes' pause does: it
// waits for SIGTERM or SIGINT and exits 0. As PID 1 it also reaps the zombies
// of processes that were reparented to it. The real node's containerd runs it
// as each pod's sandbox, from a local image: registry.k8s.io cannot be reached.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
