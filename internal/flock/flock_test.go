//go:build unix

package flock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Held tells a held lock from a free one and a missing file, and takes
// nothing for good: a lock taker that meets its test tries again.
func TestHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if held, known, err := Held(path); held || known || err != nil {
		t.Fatalf("no file: held %v known %v %v", held, known, err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if held, known, err := Held(path); held || !known || err != nil {
		t.Fatalf("free: held %v known %v %v", held, known, err)
	}
	for _, take := range []func(*os.File) (bool, error){Exclusive, Shared} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if held, err := take(f); held || err != nil {
			t.Fatalf("take: held %v %v", held, err)
		}
		if held, known, err := Held(path); !held || !known || err != nil {
			t.Errorf("taken: held %v known %v %v", held, known, err)
		}
		f.Close()
	}
	if held, _, _ := Held(path); held {
		t.Error("held after its holder closed it")
	}
}

// A lock held for a moment (a reader's test) is taken once it is let go.
func TestExclusiveWaitsOutAMomentaryHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := try(probe, exclusive); held || err != nil {
		t.Fatal(held, err)
	}
	go func() {
		time.Sleep(pause)
		probe.Close()
	}()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if held, err := Exclusive(f); held || err != nil {
		t.Errorf("held %v %v: a momentary holder refused the lock", held, err)
	}
}
