package storage

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Azure Blob Storage through its REST API (block blobs): Get Blob with
// Range and If-Match, Put Blob for small objects and Put Block + Put Block
// List for large ones (the blob appears when the list is committed), List
// Blobs and Delete Blob, signed with the account's Shared Key, a SAS token,
// or a Microsoft Entra token got by workload identity.

// AzureConfig is the pipeline's storage.azure block: where the account's
// blob service is, never how to sign in.
type AzureConfig struct {
	// Endpoint is the blob service URL of the account, e.g.
	// http://127.0.0.1:10000/devstoreaccount1 for Azurite. Default: the
	// connection string's BlobEndpoint, else AZURE_STORAGE_SERVICE_ENDPOINT,
	// else https://ACCOUNT.blob.core.windows.net.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty"`
}

const azureCreds = "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN"

// Validate returns what is wrong with the block, one message per problem,
// each starting with its YAML path.
func (c AzureConfig) Validate() []string {
	return endpointProblems("storage.azure.endpoint", c.Endpoint, azureCreds)
}

// azureVersion is the REST API version requests ask for.
const azureVersion = "2021-12-02"

type azureStore struct {
	rest
	ep      *url.URL // the account's blob service
	account string
	key     []byte     // Shared Key; nil without
	sas     url.Values // SAS token; nil without
}

// newAzure makes the client for azblob:// locations from the environment:
// AZURE_STORAGE_CONNECTION_STRING (AccountName, AccountKey or
// SharedAccessSignature, BlobEndpoint or DefaultEndpointsProtocol and
// EndpointSuffix; UseDevelopmentStorage=true for Azurite's defaults), else
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN
// (with neither: a workload identity's token when AZURE_FEDERATED_TOKEN_FILE,
// AZURE_CLIENT_ID and AZURE_TENANT_ID are set, as on AKS; else anonymous
// requests, for public containers).
func newAzure(cfg AzureConfig, getenv func(string) string, transport http.RoundTripper) (*azureStore, error) {
	s := &azureStore{rest: rest{hc: &http.Client{Transport: transport}}}
	account, key, sas, ep := getenv("AZURE_STORAGE_ACCOUNT"), getenv("AZURE_STORAGE_KEY"), getenv("AZURE_STORAGE_SAS_TOKEN"), ""
	if cs := getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		kv, err := parseConnectionString(cs)
		if err != nil {
			return nil, err
		}
		account, key, sas, ep = kv["accountname"], kv["accountkey"], kv["sharedaccesssignature"], kv["blobendpoint"]
		if ep == "" && account != "" {
			proto, suffix := kv["defaultendpointsprotocol"], kv["endpointsuffix"]
			if proto == "" {
				proto = "https"
			}
			if suffix == "" {
				suffix = "core.windows.net"
			}
			ep = proto + "://" + account + ".blob." + suffix
		}
	}
	if cfg.Endpoint != "" {
		ep = cfg.Endpoint
	}
	if ep == "" {
		ep = getenv("AZURE_STORAGE_SERVICE_ENDPOINT")
	}
	if ep == "" {
		if account == "" {
			return nil, fmt.Errorf("azblob: no Azure storage account; set %s", azureCreds)
		}
		ep = "https://" + account + ".blob.core.windows.net"
	}
	u, err := checkEndpoint(ep, azureCreds)
	if err != nil {
		return nil, fmt.Errorf("azblob endpoint: %w", err)
	}
	if account == "" { // https://ACCOUNT.blob…, or http://host:port/ACCOUNT (emulators)
		account, _, _ = strings.Cut(u.Host, ".")
		if p := strings.Trim(u.Path, "/"); p != "" {
			account = p
		}
	}
	s.ep, s.account = u, account
	switch {
	case key != "":
		if s.key, err = base64.StdEncoding.DecodeString(key); err != nil {
			return nil, errors.New("azblob: the account key is not base64")
		}
		s.sign = s.signSharedKey
	case sas != "":
		if s.sas, err = url.ParseQuery(strings.TrimPrefix(sas, "?")); err != nil {
			return nil, errors.New("azblob: the SAS token is not a query string")
		}
	case getenv("AZURE_FEDERATED_TOKEN_FILE") != "" && getenv("AZURE_CLIENT_ID") != "" && getenv("AZURE_TENANT_ID") != "":
		ts := oauth2.ReuseTokenSource(nil, &workloadIdentity{hc: s.hc, getenv: getenv})
		s.sign = func(req *http.Request) error {
			tok, err := ts.Token()
			if err != nil {
				return &AuthError{Loc: req.URL.Host, Detail: "workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID): " + err.Error()}
			}
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			return nil
		}
	}
	return s, nil
}

// workloadIdentity gets Microsoft Entra tokens for Azure Storage with a
// federated credential, as AKS workload identity sets it up: the
// Kubernetes service account token in AZURE_FEDERATED_TOKEN_FILE (read
// anew for each token: it is rotated) is exchanged at AZURE_AUTHORITY_HOST
// (default login.microsoftonline.com) for tenant AZURE_TENANT_ID and
// application AZURE_CLIENT_ID.
type workloadIdentity struct {
	hc     *http.Client
	getenv func(string) string
}

func (w *workloadIdentity) Token() (*oauth2.Token, error) {
	assertion, err := os.ReadFile(w.getenv("AZURE_FEDERATED_TOKEN_FILE"))
	if err != nil {
		return nil, fmt.Errorf("reading AZURE_FEDERATED_TOKEN_FILE: %w", err)
	}
	authority := w.getenv("AZURE_AUTHORITY_HOST")
	if authority == "" {
		authority = "https://login.microsoftonline.com/"
	}
	u := strings.TrimRight(authority, "/") + "/" + url.PathEscape(w.getenv("AZURE_TENANT_ID")) + "/oauth2/v2.0/token"
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {w.getenv("AZURE_CLIENT_ID")},
		"scope":                 {"https://storage.azure.com/.default"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {strings.TrimSpace(string(assertion))}}
	resp, err := w.hc.PostForm(u, form)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || body.AccessToken == "" {
		return nil, fmt.Errorf("the token endpoint answered %s %s %s", resp.Status, body.Error, strings.SplitN(body.Description, "\n", 2)[0])
	}
	// Renewed a minute before it expires (ReuseTokenSource renews 10 s
	// before Expiry).
	return &oauth2.Token{AccessToken: body.AccessToken, TokenType: "Bearer", Expiry: time.Now().Add(time.Duration(body.ExpiresIn)*time.Second - 50*time.Second)}, nil
}

// azuriteKey is the well-known account key of Azure's storage emulators
// (published in Azure's documentation; it guards nothing).
const azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// parseConnectionString reads "Key=Value;…" (keys case-insensitive).
func parseConnectionString(cs string) (map[string]string, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(cs, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, errors.New("AZURE_STORAGE_CONNECTION_STRING: a part is not Key=Value") // the part may be a secret: not shown
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		kv["accountname"], kv["accountkey"] = "devstoreaccount1", azuriteKey
		if kv["blobendpoint"] == "" {
			kv["blobendpoint"] = "http://127.0.0.1:10000/devstoreaccount1"
		}
	}
	return kv, nil
}

// signSharedKey signs a request with the account key (the Blob service's
// Shared Key scheme: an HMAC-SHA256 of the method, standard headers,
// x-ms- headers and the resource).
func (s *azureStore) signSharedKey(req *http.Request) error {
	h := req.Header
	length := ""
	if req.ContentLength > 0 {
		length = strconv.FormatInt(req.ContentLength, 10)
	}
	var ms []string
	for k := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			ms = append(ms, lk)
		}
	}
	slices.Sort(ms)
	var b strings.Builder
	for _, v := range []string{req.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length,
		h.Get("Content-MD5"), h.Get("Content-Type"), "", h.Get("If-Modified-Since"), h.Get("If-Match"),
		h.Get("If-None-Match"), h.Get("If-Unmodified-Since"), h.Get("Range")} {
		b.WriteString(v + "\n")
	}
	for _, k := range ms {
		b.WriteString(k + ":" + strings.TrimSpace(h.Get(k)) + "\n")
	}
	b.WriteString("/" + s.account + req.URL.EscapedPath())
	q := req.URL.Query()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range names {
		vals := slices.Clone(q[k])
		slices.Sort(vals)
		b.WriteString("\n" + strings.ToLower(k) + ":" + strings.Join(vals, ","))
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(b.String()))
	h.Set("Authorization", "SharedKey "+s.account+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return nil
}

// newRequest makes a request to the container (key "") or a blob, with
// the API version and date set and the SAS token added.
func (s *azureStore) newRequest(method, container, key string, q url.Values, body io.Reader) (*http.Request, error) {
	u := *s.ep
	u.Path = s.ep.Path + "/" + container
	if key != "" {
		u.Path += "/" + key
	}
	u.RawPath = ""
	if q == nil {
		q = url.Values{}
	}
	for k, v := range s.sas {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-ms-version", azureVersion)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	return req, nil
}

// azureError turns an error answer into a message a user can act on.
func (s *azureStore) azureError(loc Location, resp *http.Response) error {
	code := resp.Header.Get("x-ms-error-code")
	msg := readError(resp)
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal([]byte(msg), &e) == nil && e.Code != "" {
		code, msg = e.Code, strings.SplitN(e.Message, "\n", 2)[0]
	}
	switch {
	case code == "BlobNotFound":
		return &NotFoundError{Loc: loc.String(), Detail: "no such object"}
	case code == "ContainerNotFound":
		return &NotFoundError{Loc: loc.String(), Detail: "no such container"}
	case resp.StatusCode == http.StatusPreconditionFailed || code == "ConditionNotMet":
		return errChanged(loc)
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
		return &AuthError{Loc: loc.String(), Detail: fmt.Sprintf("%s (%s): set %s to credentials of account %q that may use it", code, resp.Status, azureCreds, s.account)}
	case resp.StatusCode == http.StatusNotFound:
		return &NotFoundError{Loc: loc.String(), Detail: "not found"}
	}
	err := fmt.Errorf("%s: Azure answered %s %s: %s", loc, resp.Status, code, answerDetail(resp, msg))
	if passingStatus(resp.StatusCode) { // after rest.do's retries: no config problem
		return &UnavailableError{Err: err}
	}
	return err
}

func (s *azureStore) stat(ctx context.Context, loc Location) (blobObject, error) {
	resp, err := s.do(ctx, func() (*http.Request, error) { return s.newRequest("HEAD", loc.Bucket, loc.Key, nil, nil) })
	if err != nil {
		return blobObject{}, fmt.Errorf("%s: %w", loc, err)
	}
	if resp.StatusCode != http.StatusOK {
		if resp.Header.Get("x-ms-error-code") == "" && resp.StatusCode == http.StatusNotFound {
			resp.Header.Set("x-ms-error-code", "BlobNotFound") // HEAD answers have no body to say which
		}
		return blobObject{}, s.azureError(loc, resp)
	}
	resp.Body.Close()
	return azureObject(loc, resp), nil
}

// azureObject describes the blob of an answer to HEAD or a whole GET.
func azureObject(loc Location, resp *http.Response) blobObject {
	obj := blobObject{Key: loc.Key, Size: resp.ContentLength, ETag: resp.Header.Get("ETag")}
	if b, err := base64.StdEncoding.DecodeString(resp.Header.Get("Content-MD5")); err == nil && len(b) == md5.Size {
		obj.MD5 = hex.EncodeToString(b)
	}
	obj.Modified, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	return obj
}

// get is one GET of the whole blob, whose headers describe its body.
func (s *azureStore) get(ctx context.Context, loc Location) (io.ReadCloser, blobObject, error) {
	resp, err := s.do(ctx, func() (*http.Request, error) { return s.newRequest("GET", loc.Bucket, loc.Key, nil, nil) })
	if err != nil {
		return nil, blobObject{}, fmt.Errorf("%s: %w", loc, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, blobObject{}, s.azureError(loc, resp)
	}
	return resp.Body, azureObject(loc, resp), nil
}

// open reads the pinned version only (If-Match), from off on.
func (s *azureStore) open(ctx context.Context, loc Location, obj blobObject, off int64) (io.ReadCloser, error) {
	resp, err := s.do(ctx, func() (*http.Request, error) {
		req, err := s.newRequest("GET", loc.Bucket, loc.Key, nil, nil)
		if err == nil {
			req.Header.Set("If-Match", obj.ETag)
			if off > 0 {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
			}
		}
		return req, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	want := http.StatusOK
	if off > 0 {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		return nil, s.azureError(loc, resp)
	}
	if e := resp.Header.Get("ETag"); e != "" && e != obj.ETag {
		resp.Body.Close()
		return nil, errChanged(loc)
	}
	return resp.Body, nil
}

// put uploads by one Put Blob up to mirrorPartSize, else by Put Block of
// each part and one Put Block List, which makes the blob appear whole.
// The content's MD5 is stated: Put Blob checks it, and both store it. A
// condition is If-None-Match: * or If-Match on Put Blob.
func (s *azureStore) put(ctx context.Context, loc Location, f io.ReaderAt, size int64, cond putCond) (blobObject, error) {
	if err := checkCond(loc, size, cond); err != nil {
		return blobObject{}, err
	}
	sum, err := localMD5(io.NewSectionReader(f, 0, size))
	if err != nil {
		return blobObject{}, err
	}
	raw, _ := hex.DecodeString(sum)
	b64 := base64.StdEncoding.EncodeToString(raw)
	var stored blobObject
	check := func(resp *http.Response, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", loc, err)
		}
		if resp.StatusCode != http.StatusCreated {
			if cond.set() && (resp.StatusCode == http.StatusPreconditionFailed ||
				resp.StatusCode == http.StatusConflict && resp.Header.Get("x-ms-error-code") == "BlobAlreadyExists" ||
				cond.match != "" && resp.StatusCode == http.StatusNotFound) {
				resp.Body.Close()
				return fmt.Errorf("%s: %w", loc, errConditionFailed)
			}
			return s.azureError(loc, resp)
		}
		resp.Body.Close()
		stored = blobObject{Key: loc.Key, Size: size, ETag: resp.Header.Get("ETag"), MD5: sum}
		stored.Modified, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
		return nil
	}
	if size <= mirrorPartSize {
		err := check(s.do(ctx, func() (*http.Request, error) {
			var body io.Reader = io.NewSectionReader(f, 0, size)
			if size == 0 {
				body = http.NoBody // not a chunked upload of unknown length
			}
			req, err := s.newRequest("PUT", loc.Bucket, loc.Key, nil, body)
			if err == nil {
				req.ContentLength = size
				req.Header.Set("x-ms-blob-type", "BlockBlob")
				req.Header.Set("Content-Type", "application/octet-stream")
				req.Header.Set("Content-MD5", b64)
				switch {
				case cond.absent:
					req.Header.Set("If-None-Match", "*")
				case cond.match != "":
					req.Header.Set("If-Match", `"`+strings.Trim(cond.match, `"`)+`"`)
				}
			}
			return req, err
		}))
		return stored, err
	}
	var list bytes.Buffer
	list.WriteString(`<?xml version="1.0" encoding="utf-8"?><BlockList>`)
	for i, off := 0, int64(0); off < size; i, off = i+1, off+mirrorPartSize {
		n := min(mirrorPartSize, size-off)
		id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%08d", i)) // same length for every block
		list.WriteString("<Latest>" + id + "</Latest>")
		if err := check(s.do(ctx, func() (*http.Request, error) {
			req, err := s.newRequest("PUT", loc.Bucket, loc.Key, url.Values{"comp": {"block"}, "blockid": {id}}, io.NewSectionReader(f, off, n))
			if err == nil {
				req.ContentLength = n
			}
			return req, err
		})); err != nil {
			return blobObject{}, err
		}
	}
	list.WriteString("</BlockList>")
	err = check(s.do(ctx, func() (*http.Request, error) {
		req, err := s.newRequest("PUT", loc.Bucket, loc.Key, url.Values{"comp": {"blocklist"}}, bytes.NewReader(list.Bytes()))
		if err == nil {
			req.ContentLength = int64(list.Len())
			req.Header.Set("Content-Type", "application/xml")
			req.Header.Set("x-ms-blob-content-type", "application/octet-stream")
			req.Header.Set("x-ms-blob-content-md5", b64)
		}
		return req, err
	}))
	return stored, err
}

func (s *azureStore) list(ctx context.Context, container, prefix string, max int) iter.Seq2[blobObject, error] {
	return func(yield func(blobObject, error) bool) {
		loc := Location{Kind: Azure, Bucket: container, Key: prefix}
		marker := ""
		for {
			q := url.Values{"restype": {"container"}, "comp": {"list"}, "prefix": {prefix}}
			if max > 0 {
				q.Set("maxresults", strconv.Itoa(max))
			}
			if marker != "" {
				q.Set("marker", marker)
			}
			resp, err := s.do(ctx, func() (*http.Request, error) { return s.newRequest("GET", container, "", q, nil) })
			if err != nil {
				yield(blobObject{}, fmt.Errorf("%s: %w", loc, err))
				return
			}
			if resp.StatusCode != http.StatusOK {
				yield(blobObject{}, s.azureError(loc, resp))
				return
			}
			var page struct {
				Blobs []struct {
					Name       string `xml:"Name"`
					Properties struct {
						Length int64  `xml:"Content-Length"`
						ETag   string `xml:"Etag"`
						MD5    string `xml:"Content-MD5"`
					} `xml:"Properties"`
				} `xml:"Blobs>Blob"`
				NextMarker string `xml:"NextMarker"`
			}
			err = xml.NewDecoder(resp.Body).Decode(&page)
			resp.Body.Close()
			if err != nil {
				yield(blobObject{}, fmt.Errorf("%s: Azure answer: %w", loc, err))
				return
			}
			for _, b := range page.Blobs {
				obj := blobObject{Key: b.Name, Size: b.Properties.Length, ETag: b.Properties.ETag}
				if !strings.HasPrefix(obj.ETag, `"`) {
					obj.ETag = `"` + obj.ETag + `"` // listings give it bare, headers quoted
				}
				if raw, err := base64.StdEncoding.DecodeString(b.Properties.MD5); err == nil && len(raw) == md5.Size {
					obj.MD5 = hex.EncodeToString(raw)
				}
				if !yield(obj, nil) {
					return
				}
			}
			if marker = page.NextMarker; marker == "" {
				return
			}
		}
	}
}

func (s *azureStore) remove(ctx context.Context, loc Location) error {
	resp, err := s.do(ctx, func() (*http.Request, error) { return s.newRequest("DELETE", loc.Bucket, loc.Key, nil, nil) })
	if err != nil {
		return fmt.Errorf("%s: %w", loc, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil
	}
	if resp.StatusCode/100 != 2 {
		return s.azureError(loc, resp)
	}
	resp.Body.Close()
	return nil
}

// same compares with the Content-MD5 stored with every blob uploaded here.
func (s *azureStore) same(local io.ReadSeeker, obj blobObject) (bool, error) {
	return sameMD5(local, obj.MD5)
}
