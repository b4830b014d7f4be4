// Command forward forwards the TCP connections made to one address to
// another: `forward 10.201.16.141:17443 127.0.0.1:17443`. The local cluster's
// API server listens on loopback, where this machine's clients reach it and no
// packet of theirs can leave the machine; the real nodes' kubelets, kube-proxies and
// pods reach it through this, at the host's end of the node's link.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: forward LISTEN-ADDRESS TARGET-ADDRESS")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "forward:", err)
			os.Exit(1)
		}
		go pipe(c.(*net.TCPConn), os.Args[2])
	}
}

func pipe(c *net.TCPConn, target string) {
	defer func() { _ = c.Close() }()
	t, err := net.Dial("tcp", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		return
	}
	defer func() { _ = t.Close() }()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(t, c)
		_ = t.(*net.TCPConn).CloseWrite() // the client is done sending: tell the target
		close(done)
	}()
	_, _ = io.Copy(c, t)
	_ = c.CloseWrite()
	<-done
}
