//go:build nofence

package main

// Built only by the reliability tests (go build -tags nofence), to show what
// the leader fence prevents: this operator's writes pass whatever the Lease.
const fenceOn = false
