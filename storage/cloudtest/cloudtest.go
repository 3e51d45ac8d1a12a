// Package cloudtest starts real object storage servers on loopback for
// tests: Azurite (Azure Blob Storage's emulator, an npm package) and
// fake-gcs-server (a GCS JSON API server, a Go program). Each is a separate
// process found on the machine; a test without it is skipped, saying how
// to install it (.ci/run installs both).
package cloudtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// AzuriteKey is the account key every Azure storage emulator uses for its
// account devstoreaccount1 (published with the emulators; it guards
// nothing).
const AzuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// find looks for a server program: the path in env, else name on PATH,
// else in extra directories.
func find(env, name string, extra ...string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range extra {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	return ""
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// freePort returns a loopback port nothing listens on.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs a server until the test ends and waits until it answers
// HTTP on port.
func start(t testing.TB, port int, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(3 * time.Minute) // Azurite takes tens of seconds on a loaded machine
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", filepath.Base(name), out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on port %d within 3 minutes: %s", filepath.Base(name), port, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Azurite is a running Azurite blob service.
type Azurite struct {
	// Endpoint is the account's blob service URL,
	// http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string
	// ConnectionString is what AZURE_STORAGE_CONNECTION_STRING would hold.
	ConnectionString string
}

// StartAzurite starts azurite-blob in memory on a loopback port, or skips
// the test. The program is $AUGMENT_AZURITE, azurite-blob on PATH, or in
// $AUGMENT_AZURITE_NODE_MODULES/.bin (npm install azurite).
func StartAzurite(t testing.TB) *Azurite {
	t.Helper()
	var extra []string
	if d := os.Getenv("AUGMENT_AZURITE_NODE_MODULES"); d != "" {
		extra = append(extra, filepath.Join(d, ".bin"))
	}
	bin := find("AUGMENT_AZURITE", "azurite-blob", extra...)
	if bin == "" {
		t.Skip("Azurite is not installed (npm install azurite, then set AUGMENT_AZURITE_NODE_MODULES to its node_modules, or put azurite-blob on PATH); .ci/run installs it")
	}
	port := freePort(t)
	start(t, port, bin, "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port), "--inMemoryPersistence", "--silent", "--skipApiVersionCheck", "--disableProductStyleUrl")
	ep := fmt.Sprintf("http://127.0.0.1:%d/devstoreaccount1", port)
	return &Azurite{Endpoint: ep, ConnectionString: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + AzuriteKey + ";BlobEndpoint=" + ep + ";"}
}

// CreateBucket makes a container.
func (a *Azurite) CreateBucket(t testing.TB, name string) {
	t.Helper()
	a.do(t, "PUT", "/"+name+"?restype=container", nil, http.StatusCreated)
}

// Put stores a blob in one request, as another tool would.
func (a *Azurite) Put(t testing.TB, container, key string, b []byte) {
	t.Helper()
	a.do(t, "PUT", "/"+container+"/"+key, b, http.StatusCreated, "x-ms-blob-type", "BlockBlob")
}

// do sends a request signed with the emulator's key (the Shared Key
// scheme, written here apart from package storage's so the test does not
// check the client with itself).
func (a *Azurite) do(t testing.TB, method, pathQuery string, body []byte, want int, hdr ...string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, a.Endpoint+pathQuery, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-ms-version", "2021-12-02")
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	length := ""
	if len(body) > 0 {
		length = fmt.Sprint(len(body))
	}
	var ms []string
	for k := range req.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			ms = append(ms, lk+":"+req.Header.Get(k))
		}
	}
	slices.Sort(ms)
	res := "/devstoreaccount1" + req.URL.EscapedPath()
	if q := req.URL.Query(); len(q) > 0 {
		var qs []string
		for k, v := range q {
			qs = append(qs, strings.ToLower(k)+":"+strings.Join(v, ","))
		}
		slices.Sort(qs)
		res += "\n" + strings.Join(qs, "\n")
	}
	sts := method + "\n\n\n" + length + "\n\n" + req.Header.Get("Content-Type") + "\n\n\n\n\n\n\n" + strings.Join(ms, "\n") + "\n" + res
	key, _ := base64.StdEncoding.DecodeString(AzuriteKey)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(sts))
	req.Header.Set("Authorization", "SharedKey devstoreaccount1:"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("Azurite %s %s: %s %s", method, pathQuery, resp.Status, b.String())
	}
	return b.Bytes()
}

// Download copies every blob under prefix into dir, the prefix cut off.
func (a *Azurite) Download(t testing.TB, container, prefix, dir string) {
	t.Helper()
	var list struct {
		Names      []string `xml:"Blobs>Blob>Name"`
		NextMarker string   `xml:"NextMarker"`
	}
	body := a.do(t, "GET", "/"+container+"?restype=container&comp=list&prefix="+url.QueryEscape(prefix), nil, http.StatusOK)
	if err := xml.Unmarshal(body, &list); err != nil || list.NextMarker != "" {
		t.Fatalf("Azurite list: %v (more than one page: %v)", err, list.NextMarker != "")
	}
	for _, name := range list.Names {
		write(t, dir, strings.TrimPrefix(name, prefix), a.do(t, "GET", "/"+container+"/"+escapePath(name), nil, http.StatusOK))
	}
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func write(t testing.TB, dir, name string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FakeGCS is a running fake-gcs-server.
type FakeGCS struct {
	// Host is host:port, what STORAGE_EMULATOR_HOST would hold.
	Host string
}

// StartFakeGCS starts fake-gcs-server in memory on a loopback port, or
// skips the test. The program is $AUGMENT_FAKE_GCS_SERVER,
// fake-gcs-server on PATH, or in $(go env GOPATH)/bin.
func StartFakeGCS(t testing.TB) *FakeGCS {
	t.Helper()
	var extra []string
	if gp, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		extra = append(extra, filepath.Join(strings.TrimSpace(string(gp)), "bin"))
	}
	bin := find("AUGMENT_FAKE_GCS_SERVER", "fake-gcs-server", extra...)
	if bin == "" {
		t.Skip("fake-gcs-server is not installed (go install github.com/fsouza/fake-gcs-server@v1.56.1, or set AUGMENT_FAKE_GCS_SERVER); .ci/run installs it")
	}
	port := freePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	start(t, port, bin, "-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(port), "-backend", "memory",
		"-external-url", "http://"+host, "-public-host", host, "-log-level", "error")
	return &FakeGCS{Host: host}
}

// CreateBucket makes a bucket.
func (g *FakeGCS) CreateBucket(t testing.TB, name string) {
	t.Helper()
	resp, err := http.Post("http://"+g.Host+"/storage/v1/b", "application/json", strings.NewReader(`{"name":"`+name+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fake-gcs-server: create bucket %s: %s", name, resp.Status)
	}
}

// Put stores an object by a media upload, as another tool would.
func (g *FakeGCS) Put(t testing.TB, bucket, key string, b []byte) {
	t.Helper()
	u := "http://" + g.Host + "/upload/storage/v1/b/" + bucket + "/o?uploadType=media&name=" + url.QueryEscape(key)
	resp, err := http.Post(u, "application/octet-stream", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fake-gcs-server: put %s: %s", key, resp.Status)
	}
}

// Download copies every object under prefix into dir, the prefix cut off.
func (g *FakeGCS) Download(t testing.TB, bucket, prefix, dir string) {
	t.Helper()
	get := func(u string) []byte {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("fake-gcs-server GET %s: %s %v", u, resp.Status, err)
		}
		return b
	}
	base := "http://" + g.Host + "/storage/v1/b/" + bucket + "/o"
	var list struct {
		Items []struct {
			Name string `json:"name"`
		} `json:"items"`
		NextPageToken string `json:"nextPageToken"`
	}
	if err := json.Unmarshal(get(base+"?prefix="+url.QueryEscape(prefix)), &list); err != nil || list.NextPageToken != "" {
		t.Fatalf("fake-gcs-server list: %v (more than one page: %v)", err, list.NextPageToken != "")
	}
	for _, it := range list.Items {
		write(t, dir, strings.TrimPrefix(it.Name, prefix), get(base+"/"+url.PathEscape(it.Name)+"?alt=media"))
	}
}
