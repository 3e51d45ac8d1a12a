package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Leases lock an output on object storage, as the output directory's lock
// file (flock) locks a local one. A lease is an object of the prefix,
// .augment/lease-<name>.json, naming its holder. It is created with a
// conditional write (blobStore.put with ifAbsent: S3's and Azure's
// If-None-Match: *, GCS's ifGenerationMatch=0), so of two processes that
// ask at once exactly one gets it; the holder renews it (a write
// conditional on the version it last wrote: If-Match on the ETag, GCS's
// ifGenerationMatch on the generation) every leaseRenew and deletes it
// when done. Every store augment writes to (s3://, gs://, azblob://)
// decides these conditions itself, so leases hold on all three.
//
// A process killed with its lease (kill -9, a lost machine) cannot delete
// it: the lease is stale once leaseTTL has passed without renewal (judged
// by the store's time of the last write (Last-Modified, GCS's updated)
// against this machine's clock, so clocks
// must agree to well within leaseTTL), or at once when it names a process
// of this host that is gone. A stale lease is taken over by a write
// conditional on its version, which again only one taker wins.
//
// The limit, as for every lease without fencing: a holder that stalls for
// longer than leaseTTL (a paused VM, a partitioned network) may find its
// lease taken over. It learns so at its next renewal, which fails its
// condition, and then stops writing (the mirror fails every later
// operation), but what it uploaded between the takeover and that renewal
// may interleave with the new holder's writes.
const (
	leasePrefix = ".augment/lease-"
	leaseTTL    = 2 * time.Minute
)

// leaseRenew is how often a held lease is renewed (a variable for tests).
var leaseRenew = 30 * time.Second

// A LeaseHeldError says another process holds the lease an output on
// object storage needs.
type LeaseHeldError struct {
	Dir    string // the prefix, s3://bucket/prefix (gs://, azblob://)
	Holder string // who holds it, as its lease says
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%s is in use by another augment run (%s)", e.Dir, e.Holder)
}

// leaseBody is a lease's content.
type leaseBody struct {
	Name    string    `json:"name"` // "run", "worker-1-of-3"
	Owner   string    `json:"owner"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Renewed time.Time `json:"renewed"`
}

func (b leaseBody) String() string {
	s := fmt.Sprintf("%s: host %s, pid %d, started %s", b.Name, b.Host, b.PID, b.Started.Format(time.RFC3339))
	if !b.Renewed.IsZero() {
		s += ", renewed " + b.Renewed.Format(time.RFC3339)
	}
	return s
}

// A Lease is held by a Mirror from Lock to Close.
type Lease struct {
	m    *Mirror
	key  string
	body leaseBody
	mu   sync.Mutex
	etag string
	stop chan struct{}
	done chan struct{}
}

func (m *Mirror) leaseKey(name string) string { return m.object(leasePrefix + name + ".json") }

// Lock takes the lease name ("run", "worker-1-of-3") of the prefix and
// keeps it until Close. A lease whose name starts with one of conflicts
// ("worker-") must not be held alongside: if one is, Lock gives its lease
// back. A lease held by another live process is a *LeaseHeldError, at
// once (nothing is waited for).
func (m *Mirror) Lock(ctx context.Context, name string, conflicts ...string) error {
	host, _ := os.Hostname()
	now := time.Now().UTC().Truncate(time.Second)
	l := &Lease{m: m, key: m.leaseKey(name), stop: make(chan struct{}), done: make(chan struct{}),
		body: leaseBody{Name: name, Owner: randomName(), Host: host, PID: os.Getpid(), Started: now}}
	if err := l.acquire(ctx); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx) // stops a listing left early
	defer cancel()
	for _, c := range conflicts {
		for obj, err := range m.s.list(lctx, m.loc.Bucket, m.object(leasePrefix+c), 0) {
			if err != nil {
				l.release()
				return fmt.Errorf("listing the leases of other processes (%s*): %w", leasePrefix+c, err)
			}
			if obj.Key == l.key {
				continue
			}
			b, _, stale, err := m.readLease(ctx, obj.Key)
			if err != nil || stale {
				continue // gone since, or stale: it writes nothing more
			}
			l.release()
			return &LeaseHeldError{Dir: m.String(), Holder: b.String()}
		}
	}
	m.lease = l
	go l.renew()
	return nil
}

// acquire creates the lease, or takes over a stale one.
func (l *Lease) acquire(ctx context.Context) error {
	m := l.m
	for range 3 {
		etag, err := l.put(ctx, ifAbsent)
		if err == nil {
			l.etag = etag
			return nil
		}
		if !errors.Is(err, errConditionFailed) {
			return err
		}
		held, etag, stale, err := m.readLease(ctx, l.key)
		if errors.Is(err, errNoLease) {
			continue // released in between: ask again
		}
		if err != nil {
			return err
		}
		if held.Owner == l.body.Owner {
			// Ours: the create went through, its answer was lost,
			// and the client's resend found it in place.
			l.etag = etag
			return nil
		}
		if !stale {
			return &LeaseHeldError{Dir: m.String(), Holder: held.String()}
		}
		m.log.Warn("taking over a stale lease of the output", "dir", m.String(), "lease", held.String())
		if etag, err = l.put(ctx, ifMatch(etag)); err == nil {
			l.etag = etag
			return nil
		}
		if !errors.Is(err, errConditionFailed) {
			return err
		}
		// Another process took it over first (it holds it now), or it
		// was released in between: ask again.
	}
	held, _, _, err := m.readLease(ctx, l.key)
	if err != nil {
		return err
	}
	return &LeaseHeldError{Dir: m.String(), Holder: held.String()}
}

// put writes the lease under cond and returns the version written.
func (l *Lease) put(ctx context.Context, cond putCond) (string, error) {
	b, _ := json.Marshal(l.body)
	obj, err := l.m.s.put(ctx, Location{Kind: l.m.loc.Kind, Bucket: l.m.loc.Bucket, Key: l.key}, bytes.NewReader(b), int64(len(b)), cond)
	return strings.Trim(obj.ETag, `"`), err
}

var errNoLease = errors.New("no lease")

// readLease reads the lease at key: its holder, ETag, and whether it is
// stale (see above).
func (m *Mirror) readLease(ctx context.Context, key string) (leaseBody, string, bool, error) {
	var b leaseBody
	loc := Location{Kind: m.loc.Kind, Bucket: m.loc.Bucket, Key: key}
	body, obj, err := m.s.get(ctx, loc)
	if err == nil {
		var raw []byte
		raw, err = io.ReadAll(io.LimitReader(body, 64<<10))
		body.Close()
		if err == nil {
			err = json.Unmarshal(raw, &b)
		}
		if err == nil && obj.Modified.IsZero() {
			err = errors.New("the store did not say when it was written")
		}
	}
	if err != nil {
		if errors.As(err, new(*NotFoundError)) {
			return b, "", false, errNoLease
		}
		return b, "", false, fmt.Errorf("%s: lease %s: %w", m.String(), key, err)
	}
	host, _ := os.Hostname()
	stale := time.Since(obj.Modified) > leaseTTL ||
		b.Host == host && b.PID != os.Getpid() && b.PID > 0 && !pidAlive(b.PID)
	return b, strings.Trim(obj.ETag, `"`), stale, nil
}

// LeaseLive reports whether a process holds a lease of the prefix, the
// run's or a worker's: one that is there and not stale by the rule above
// (renewed within leaseTTL, and not naming a gone process of this host).
// An error says it cannot be told.
func (m *Mirror) LeaseLive(ctx context.Context) (bool, error) {
	lctx, cancel := context.WithCancel(ctx) // stops a listing left early
	defer cancel()
	for obj, err := range m.s.list(lctx, m.loc.Bucket, m.object(leasePrefix), 0) {
		if err != nil {
			return false, fmt.Errorf("listing the leases (%s*): %w", leasePrefix, err)
		}
		_, _, stale, err := m.readLease(ctx, obj.Key)
		switch {
		case errors.Is(err, errNoLease): // released since
		case err != nil:
			return false, err
		case !stale:
			return true, nil
		}
	}
	return false, nil
}

// renew rewrites the lease every leaseRenew until Close. A renewal whose
// condition fails (taken over) or that cannot be made for leaseTTL fails
// the mirror: it writes nothing more.
func (l *Lease) renew() {
	defer close(l.done)
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		l.body.Renewed = time.Now().UTC().Truncate(time.Second)
		etag, err := l.put(l.m.ctx, ifMatch(l.etag))
		if err == nil {
			l.etag, last = etag, time.Now()
		}
		l.mu.Unlock()
		switch {
		case err == nil:
		case errors.Is(err, errConditionFailed):
			l.m.fail(fmt.Errorf("lost the lease of the output to another process; nothing more is written: %w", err))
			return
		case time.Since(last) > leaseTTL:
			l.m.fail(fmt.Errorf("could not renew the lease of the output for %s; nothing more is written: %w", leaseTTL, err))
			return
		}
	}
}

// release stops the renewals and deletes the lease if it is still ours.
func (l *Lease) release() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	if l.m.lease == l {
		<-l.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, etag, _, err := l.m.readLease(ctx, l.key)
	if errors.Is(err, errNoLease) {
		return nil
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	ours := strings.Trim(etag, `"`) == l.etag
	l.mu.Unlock()
	if !ours {
		return nil
	}
	return l.m.s.remove(ctx, Location{Kind: l.m.loc.Kind, Bucket: l.m.loc.Bucket, Key: l.key})
}
