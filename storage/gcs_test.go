package storage

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Credentials come from Application Default Credentials: a service
// account key file named by GOOGLE_APPLICATION_CREDENTIALS is exchanged at
// its token_uri (a loopback server here) for a token sent as a bearer
// token; the key never leaves the machine, nor is it in the pipeline.
func TestGCSApplicationDefaultCredentials(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var exchanges atomic.Int32
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		exchanges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"ya29.test-token","token_type":"Bearer","expires_in":3600}`)
	}))
	defer token.Close()
	var auths []string
	gcs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer ya29.test-token" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":401,"message":"Anonymous caller does not have storage.objects.get access"}}`)
			return
		}
		if r.URL.EscapedPath() != "/storage/v1/b/data/o/a%2Fb.jsonl" {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":404,"message":"No such object: data/a/b.jsonl"}}`)
			return
		}
		io.WriteString(w, `{"name":"a/b.jsonl","size":"3","generation":"1700000000000007","md5Hash":"rL0Y20zC+Fzt72VPzMSk2A=="}`)
	}))
	defer gcs.Close()
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		"client_email": "augment@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": token.URL})
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, sa, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	o := New(Options{GCS: GCSConfig{Endpoint: gcs.URL}, Getenv: func(string) string { return "" }})
	ctx := context.Background()
	info, err := o.Stat(ctx, "gs://data/a/b.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if info.Pin != "gs://data/a/b.jsonl#generation=1700000000000007" || info.Size != 3 || info.obj.MD5 != "acbd18db4cc2f85cedef654fccc4a4d8" {
		t.Errorf("info %+v", info)
	}
	if _, err := o.Stat(ctx, "gs://data/other.jsonl"); err == nil || !strings.Contains(err.Error(), "no such object") {
		t.Errorf("missing object: %v", err)
	}
	if exchanges.Load() != 1 || auths[0] != "Bearer ya29.test-token" {
		t.Errorf("%d token exchanges, authorization %q", exchanges.Load(), auths)
	}

	// The emulator convention: STORAGE_EMULATOR_HOST is spoken to
	// without credentials, and a refusal says what to set.
	host := strings.TrimPrefix(gcs.URL, "http://")
	o = New(Options{Getenv: func(k string) string { return map[string]string{"STORAGE_EMULATOR_HOST": host}[k] }})
	_, err = o.Stat(ctx, "gs://data/a/b.jsonl")
	var auth *AuthError
	if !errors.As(err, &auth) || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Errorf("unauthenticated: %v", err)
	}
	if last := auths[len(auths)-1]; last != "" {
		t.Errorf("the emulator was sent %q", last)
	}
}

// A key file that GOOGLE_APPLICATION_CREDENTIALS names but that cannot be
// read is an error, not anonymous access (a public bucket would have been
// read unauthenticated, a private one refused with a hint to set the very
// variable).
func TestGCSCredentialsFileMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.json")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", missing)
	o := New(Options{GCS: GCSConfig{Endpoint: "http://127.0.0.1:1"}, Getenv: os.Getenv})
	_, err := o.Stat(context.Background(), "gs://data/a/b.jsonl")
	if err == nil || !strings.Contains(err.Error(), "GOOGLE_APPLICATION_CREDENTIALS") || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("got %v, want an error naming the variable and the file", err)
	}
}
