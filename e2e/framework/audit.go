package framework

// The API server's audit log (hack/cluster.sh logs every create, update,
// patch and delete): who wrote what, when, and what was answered.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Request is one write in the API server's audit log (hack/cluster.sh logs
// every create, update, patch and delete).
type Request struct {
	At, Done          time.Time // received, and answered
	User, UserAgent   string
	Verb, URI, Object string // object: resource/namespace/name
	Code              int
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s %s -> %d in %s", r.At.Format(time.StampMicro), r.Verb, r.URI, r.Code, Ms(r.Done.Sub(r.At)))
}

// Audit returns the writes logged after t that keep says to.
func (h *Harness) Audit(t time.Time, keep func(Request) bool) []Request {
	h.T.Helper()
	f, err := os.Open(filepath.Join(h.ClusterDir, "logs", "audit.log"))
	if err != nil {
		h.T.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return ReadAudit(f, t, keep)
}

// ReadAudit reads audit log lines from r: the writes logged after t that
// keep says to.
func ReadAudit(r io.Reader, t time.Time, keep func(Request) bool) []Request {
	var rs []Request
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Verb, RequestURI, UserAgent string
			User                        struct{ Username string }
			ObjectRef                   struct{ Resource, Namespace, Name string }
			ResponseStatus              struct{ Code int }
			Received                    metav1.MicroTime `json:"requestReceivedTimestamp"`
			Stage                       metav1.MicroTime `json:"stageTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || !e.Received.After(t) {
			continue
		}
		r := Request{e.Received.Time, e.Stage.Time, e.User.Username, e.UserAgent, e.Verb, strings.Split(e.RequestURI, "?")[0],
			e.ObjectRef.Resource + "/" + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name, e.ResponseStatus.Code}
		if keep(r) {
			rs = append(rs, r)
		}
	}
	return rs
}

// OperatorWrites are the writes of operators after t: their user agent is the
// operator's name, whatever identity they run as.
func (h *Harness) OperatorWrites(t time.Time) []Request {
	return h.Audit(t, func(r Request) bool { return r.UserAgent == "operador-promociones" })
}

// AuditSize is where the audit log ends now: auditFrom reads from there, so
// that each run reads only its own part of a log that grows by millions of lines.
func (h *Harness) AuditSize() int64 {
	st, err := os.Stat(filepath.Join(h.ClusterDir, "logs", "audit.log"))
	if err != nil {
		h.T.Fatal(err)
	}
	return st.Size()
}

// AuditFrom is the writes logged after offset that keep says to. If the API server
// rotated the log since (--audit-log-maxsize), the rest of the older file
// is read first.
func (h *Harness) AuditFrom(offset int64, keep func(Request) bool) []Request {
	dir := filepath.Join(h.ClusterDir, "logs")
	read := func(name string, from int64) []Request {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			h.T.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.Seek(from, 0); err != nil {
			h.T.Fatal(err)
		}
		return ReadAudit(f, time.Time{}, keep)
	}
	if st, err := os.Stat(filepath.Join(dir, "audit.log")); err == nil && st.Size() >= offset {
		return read("audit.log", offset)
	}
	rotated, _ := filepath.Glob(filepath.Join(dir, "audit-*.log")) // named by time: the last is the newest
	if len(rotated) == 0 {
		h.T.Fatal("the audit log is shorter than before and no rotated file is there")
	}
	return append(read(filepath.Base(rotated[len(rotated)-1]), offset), read("audit.log", 0)...)
}

// AuditFlushed waits until the audit log holds a write made now, so that it
// holds every write made before.
func (h *Harness) AuditFlushed() {
	h.T.Helper()
	// Named here: the audit log names no object the API server named itself (generateName).
	sentinel := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("auditoria-%d", time.Now().UnixNano()), "namespace": "default"}}}
	from := h.AuditSize() // the sentinel's line comes after: what is before need not be read again
	if err := h.C.Create(context.Background(), sentinel); err != nil {
		h.T.Fatal(err)
	}
	h.T.Cleanup(func() { _ = h.C.Delete(context.Background(), sentinel) })
	h.Eventually("the audit log is written up to now", func() error {
		if len(h.AuditFrom(from, func(r Request) bool { return strings.HasSuffix(r.Object, "/"+sentinel.GetName()) })) == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}
