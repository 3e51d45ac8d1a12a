package storage

import (
	"context"
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

func TestAzureEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name          string
		env           map[string]string
		ep, account   string
		key, sas, err bool
	}{
		{name: "connection string with endpoint",
			env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"},
			ep:  "http://127.0.0.1:10000/devstoreaccount1", account: "devstoreaccount1", key: true},
		{name: "connection string with suffix and SAS",
			env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct;SharedAccessSignature=sv=2021-12-02&sig=abc;EndpointSuffix=core.chinacloudapi.cn"},
			ep:  "https://acct.blob.core.chinacloudapi.cn", account: "acct", sas: true},
		{name: "development storage",
			env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"},
			ep:  "http://127.0.0.1:10000/devstoreaccount1", account: "devstoreaccount1", key: true},
		{name: "account and key",
			env: map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "a2V5"},
			ep:  "https://acct.blob.core.windows.net", account: "acct", key: true},
		{name: "account and SAS with ?",
			env: map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_SAS_TOKEN": "?sv=2021-12-02&sig=abc"},
			ep:  "https://acct.blob.core.windows.net", account: "acct", sas: true},
		{name: "endpoint names the account",
			env: map[string]string{"AZURE_STORAGE_SERVICE_ENDPOINT": "http://127.0.0.1:10000/devstoreaccount1/"},
			ep:  "http://127.0.0.1:10000/devstoreaccount1", account: "devstoreaccount1"},
		{name: "nothing", env: map[string]string{}, err: true},
		{name: "key not base64", env: map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "not base64!"}, err: true},
		{name: "broken connection string", env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "AccountName=acct;secret"}, err: true},
	} {
		s, err := newAzure(AzureConfig{}, func(k string) string { return tc.env[k] }, http.DefaultTransport)
		if tc.err {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "not base64!") {
				t.Errorf("%s: the error repeats the credential: %v", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.ep.String() != tc.ep || s.account != tc.account || (s.key != nil) != tc.key || (s.sas != nil) != tc.sas {
			t.Errorf("%s: endpoint %s account %q key %v sas %v", tc.name, s.ep, s.account, s.key != nil, s.sas != nil)
		}
	}
	if s, err := newAzure(AzureConfig{Endpoint: "http://h:1/acct"}, func(k string) string {
		return map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}[k]
	}, nil); err != nil || s.ep.String() != "http://h:1/acct" {
		t.Errorf("storage.azure.endpoint does not win over the connection string: %v %v", s, err)
	}
}

// The Shared Key signature of a fixed request, computed by hand from the
// scheme's rules (string to sign, HMAC-SHA256 with the decoded key).
func TestAzureSharedKey(t *testing.T) {
	s, err := newAzure(AzureConfig{}, func(k string) string {
		return map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_KEY": "c2VjcmV0"}[k] // "secret"
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://acct.blob.core.windows.net/c/a%20b?comp=list&restype=container", nil)
	req.Header.Set("x-ms-date", "Wed, 25 Nov 2026 12:00:00 GMT")
	req.Header.Set("x-ms-version", "2021-12-02")
	req.Header.Set("Range", "bytes=5-")
	s.signSharedKey(req)
	// printf 'GET\n\n\n\n\n\n\n\n\n\n\nbytes=5-\nx-ms-date:Wed, 25 Nov 2026 12:00:00 GMT\nx-ms-version:2021-12-02\n/acct/c/a%%20b\ncomp:list\nrestype:container' |
	//   openssl dgst -sha256 -hmac secret -binary | base64
	const want = "SharedKey acct:0l01lV0axIi364Wfsg/40Y+ZKLbHld7d34VsCsuBPxI="
	if got := req.Header.Get("Authorization"); got != want {
		t.Errorf("Authorization %q, want %q", got, want)
	}
}

// FuzzConnectionString: any string parses or is refused without a panic,
// and a refusal never repeats the string.
func FuzzConnectionString(f *testing.F) {
	for _, s := range []string{"AccountName=a;AccountKey=a2V5", "UseDevelopmentStorage=true", ";;", "a=b=c;d", "BlobEndpoint=http://x/y;SharedAccessSignature=sv=1&sig=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cs string) {
		kv, err := parseConnectionString(cs)
		if err != nil {
			if len(cs) > 8 && strings.Contains(err.Error(), cs) {
				t.Fatalf("the error repeats the connection string: %v", err)
			}
			return
		}
		for k := range kv {
			if k != strings.ToLower(k) {
				t.Fatalf("key %q not lowercased", k)
			}
		}
	})
}

// Workload identity (AKS): the federated token file is exchanged at the
// authority for a storage token, sent as a bearer token and reused; a
// refused exchange is an AuthError.
func TestAzureWorkloadIdentity(t *testing.T) {
	var exchanges atomic.Int32
	authority := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.URL.Path != "/tenant-1/oauth2/v2.0/token" || r.Form.Get("client_id") != "app-1" || r.Form.Get("client_assertion") != "k8s-sa-token" ||
			r.Form.Get("scope") != "https://storage.azure.com/.default" || r.Form.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"invalid_client","error_description":"AADSTS700016: no such application"}`)
			return
		}
		exchanges.Add(1)
		io.WriteString(w, `{"token_type":"Bearer","expires_in":3599,"access_token":"entra-token"}`)
	}))
	defer authority.Close()
	var auths []string
	blob := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer entra-token" || r.URL.Path != "/data/x.jsonl" {
			w.Header().Set("x-ms-error-code", "NoAuthenticationInformation")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("ETag", `"0x8DC"`)
		w.Header().Set("Content-Length", "3")
	}))
	defer blob.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("k8s-sa-token\n"), 0o600)
	env := map[string]string{"AZURE_STORAGE_ACCOUNT": "acct", "AZURE_STORAGE_SERVICE_ENDPOINT": blob.URL,
		"AZURE_FEDERATED_TOKEN_FILE": tokenFile, "AZURE_CLIENT_ID": "app-1", "AZURE_TENANT_ID": "tenant-1", "AZURE_AUTHORITY_HOST": authority.URL + "/"}
	o := New(Options{Getenv: func(k string) string { return env[k] }})
	for range 2 {
		info, err := o.Stat(context.Background(), "azblob://data/x.jsonl")
		if err != nil || info.Pin != `azblob://data/x.jsonl#etag=0x8DC` || info.Size != 3 {
			t.Fatalf("stat: %+v, %v", info, err)
		}
	}
	if exchanges.Load() != 1 || len(auths) != 2 || auths[1] != "Bearer entra-token" {
		t.Errorf("%d exchanges, authorization %q", exchanges.Load(), auths)
	}
	env["AZURE_CLIENT_ID"] = "app-2"
	o = New(Options{Getenv: func(k string) string { return env[k] }})
	var auth *AuthError
	if _, err := o.Stat(context.Background(), "azblob://data/x.jsonl"); !errors.As(err, &auth) || !strings.Contains(err.Error(), "AADSTS700016") || strings.Contains(err.Error(), "k8s-sa-token") {
		t.Errorf("refused exchange: %v", err)
	}
}
