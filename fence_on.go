//go:build !nofence

package main

// fenceOn: every write passes the leader fence (fence.go). fence_off.go, a
// test-only build, turns it off to show what it prevents.
const fenceOn = true
