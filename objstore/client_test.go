package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// openFake opens a client of bucket bkt, prefix pfx, at the fake store
// at endpoint; query is added to the URL.
func openFake(t *testing.T, endpoint, query string) *Client {
	t.Helper()
	c, err := Open(Config{URL: "s3://bkt/pfx?endpoint=" + endpoint + query,
		Environ: []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// smallParts makes Put send objects of 5 MiB or more (S3's smallest part)
// in parts of 5 MiB for the test.
func smallParts(t *testing.T) {
	from, size := multipartFrom, partSize
	multipartFrom, partSize = 5<<20, 5<<20
	t.Cleanup(func() { multipartFrom, partSize = from, size })
}

// An object past multipartFrom goes up in parts and reads back whole; one
// below it in one PUT.
func TestPutInPartsReadsBackWhole(t *testing.T) {
	smallParts(t)
	c := openTest(t)
	ctx := testenv.Context(t)
	for _, size := range []int{5<<20 - 1, 5 << 20, 11<<20 + 3} {
		body := make([]byte, size)
		_, _ = rand.Read(body)
		key := fmt.Sprintf("parts/%s/%d", t.Name(), size)
		if err := c.Put(ctx, key, bytes.NewReader(body), int64(size)); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		r, n, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || n != int64(size) || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: read back %d (said %d), %v; equal %v", size, len(got), n, err, bytes.Equal(got, body))
		}
		rr, err := c.GetRange(ctx, key, int64(size)-10, 20)
		if err != nil {
			t.Fatal(err)
		}
		tail, _ := io.ReadAll(rr)
		_ = rr.Close()
		if !bytes.Equal(tail, body[size-10:]) {
			t.Errorf("%d bytes: the last 10 read as %x", size, tail)
		}
	}
}

// fakeS3 answers a multipart upload whose second part fails (500), and
// records the requests it was sent.
type fakeS3 struct {
	mu       sync.Mutex
	requests []string
	// location is GetBucketLocation's answer.
	location string
	// auth is the Authorization header of each request but the location's.
	auth []string
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	what := r.Method + " " + r.URL.Path
	for _, k := range []string{"uploads", "partNumber", "uploadId", "location"} {
		if q.Has(k) {
			what += " " + k + "=" + q.Get(k)
		}
	}
	f.requests = append(f.requests, what)
	switch {
	case q.Has("location"):
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">%s</LocationConstraint>`, f.location)
		return
	case r.Method == http.MethodPost && q.Has("uploads"):
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>bkt</Bucket><Key>k</Key><UploadId>up1</UploadId></InitiateMultipartUploadResult>`)
	case r.Method == http.MethodPut && q.Get("partNumber") == "2":
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>no</Message></Error>`)
	case r.Method == http.MethodPut:
		w.Header().Set("ETag", `"part"`)
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Length", "0")
	}
	f.auth = append(f.auth, r.Header.Get("Authorization"))
}

// A multipart upload whose part fails is aborted (no part left stored)
// and the put says the store is unavailable.
func TestPutInPartsAbortsWhenAPartFails(t *testing.T) {
	smallParts(t)
	f := &fakeS3{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := openFake(t, srv.URL, "&region=us-east-1")
	err := c.Put(testenv.Context(t), "big", bytes.NewReader(make([]byte, 12<<20)), 12<<20)
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("put: %v, want EUnavailable", err)
	}
	want := []string{
		"POST /bkt/pfx/big uploads=",
		"PUT /bkt/pfx/big partNumber=1 uploadId=up1",
		"PUT /bkt/pfx/big partNumber=2 uploadId=up1",
		"DELETE /bkt/pfx/big uploadId=up1",
	}
	if strings.Join(f.requests, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(f.requests, "\n"), strings.Join(want, "\n"))
	}
}

// A URL without a region has the store asked for the bucket's once, and
// every request after is signed for it.
func TestTheBucketsRegionIsAskedOnce(t *testing.T) {
	for _, tc := range []struct{ said, want string }{{"eu-west-2", "eu-west-2"}, {"", "us-east-1"}, {"EU", "eu-west-1"}} {
		f := &fakeS3{location: tc.said}
		srv := httptest.NewServer(f)
		c := openFake(t, srv.URL, "")
		ctx := testenv.Context(t)
		for i := range 3 {
			if _, _, err := c.Stat(ctx, fmt.Sprint("k", i)); err != nil {
				t.Fatal(err)
			}
		}
		srv.Close()
		asked := 0
		for _, r := range f.requests {
			if strings.HasSuffix(r, "location=") {
				asked++
			}
		}
		if asked != 1 || len(f.auth) != 3 {
			t.Errorf("%q: asked %d times, %d other requests: %q", tc.said, asked, len(f.auth), f.requests)
		}
		for _, a := range f.auth {
			if !strings.Contains(a, "/"+tc.want+"/s3/aws4_request") {
				t.Errorf("%q: a request signed as %q, want region %s", tc.said, a, tc.want)
			}
		}
	}
}

// The bucket goes in the path but for AWS's own endpoints, where a bucket
// whose name is a DNS label goes in the host name.
func TestPathStyle(t *testing.T) {
	for endpoint, want := range map[string]bool{
		"127.0.0.1:9000": true, "minio.example.com": true, "s3.eu-west-2.amazonaws.com": false,
		"s3.amazonaws.com:443": false,
	} {
		if got := pathStyle(Location{Endpoint: endpoint, Bucket: "bkt"}); got != want {
			t.Errorf("%s: path style %v, want %v", endpoint, got, want)
		}
	}
	if !pathStyle(Location{Endpoint: "s3.amazonaws.com", Bucket: "a.b"}) {
		t.Error("a bucket with a dot is not in the path")
	}
}

// storeFunc is a fake store answering every request with fn.
func storeFunc(t *testing.T, fn http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(fn)
	t.Cleanup(srv.Close)
	return srv
}

// A redirect is not followed: a write sent elsewhere (Go would make it a
// GET) is not taken for done.
func TestARedirectedWriteFails(t *testing.T) {
	var elsewhere atomic.Int32
	other := storeFunc(t, func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) })
	srv := storeFunc(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusMovedPermanently)
	})
	c := openFake(t, srv.URL, "&region=us-east-1")
	ctx := testenv.Context(t)
	if err := c.Put(ctx, "k", strings.NewReader("x"), 1); err == nil {
		t.Error("a redirected put succeeded")
	}
	if err := c.Delete(ctx, "k"); err == nil {
		t.Error("a redirected delete succeeded")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// A DeleteObjects carries the Content-MD5 of its body, which stores that
// predate S3's CRC checksums require.
func TestDeletePrefixSendsContentMD5(t *testing.T) {
	var asked atomic.Int32
	srv := storeFunc(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pfx/s/a</Key><Size>1</Size></Contents><Contents><Key>pfx/s/b</Key><Size>1</Size></Contents></ListBucketResult>`)
		case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
			asked.Add(1)
			body, _ := io.ReadAll(r.Body)
			sum := md5.Sum(body)
			if got := r.Header.Get("Content-MD5"); got != base64.StdEncoding.EncodeToString(sum[:]) {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `<Error><Code>MissingContentMD5</Code><Message>%q</Message></Error>`, got)
				return
			}
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult></DeleteResult>`)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	})
	c := openFake(t, srv.URL, "&region=us-east-1")
	n, err := c.DeletePrefix(testenv.Context(t), "s/")
	if err != nil || n != 2 || asked.Load() != 1 {
		t.Fatalf("removed %d, %v (%d requests)", n, err, asked.Load())
	}
}

// A listing that says more pages follow and names none is an error, not
// the end: a deletion would leave what it did not see.
func TestListCutShortIsAnError(t *testing.T) {
	srv := storeFunc(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pfx/s/a</Key><Size>1</Size></Contents></ListBucketResult>`)
	})
	c := openFake(t, srv.URL, "&region=us-east-1")
	err := c.List(testenv.Context(t), "s/", func(string, int64) error { return nil })
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("list: %v, want EUnavailable", err)
	}
}

// A range past the largest offset is refused before any request.
func TestGetRangeRefusesAnOverflow(t *testing.T) {
	c := openFake(t, "http://127.0.0.1:1", "&region=us-east-1")
	if _, err := c.GetRange(testenv.Context(t), "k", math.MaxInt64-2, 10); !berth.IsCode(err, berth.EInternal) {
		t.Fatalf("GetRange: %v, want EInternal", err)
	}
}

// The bucket's region: a server error is not kept as the answer (the
// next call asks again), a region that is not a DNS label is refused and
// not kept, and a caller waits for another's question no longer than its
// own deadline.
func TestTheBucketsRegionIsAskedAgainUntilAnswered(t *testing.T) {
	var mu sync.Mutex
	answers := []string{"503", "a/b", "eu-west-2"}
	var auth []string
	srv := storeFunc(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !r.URL.Query().Has("location") {
			auth = append(auth, r.Header.Get("Authorization"))
			return
		}
		a := answers[0]
		answers = answers[1:]
		if a == "503" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<Error><Code>SlowDown</Code></Error>`)
			return
		}
		fmt.Fprintf(w, `<LocationConstraint>%s</LocationConstraint>`, a)
	})
	c := openFake(t, srv.URL, "")
	ctx := testenv.Context(t)
	if _, _, err := c.Stat(ctx, "k"); err != nil {
		t.Fatalf("after a 503: %v", err)
	}
	if _, _, err := c.Stat(ctx, "k"); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("a region a/b: %v, want EInvalid", err)
	}
	for range 2 {
		if _, _, err := c.Stat(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 0 || len(auth) != 3 || !strings.Contains(auth[0], "/us-east-1/") ||
		!strings.Contains(auth[1], "/eu-west-2/") || !strings.Contains(auth[2], "/eu-west-2/") {
		t.Errorf("answers left %q; requests signed %q", answers, auth)
	}

	release := make(chan struct{})
	slow := storeFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("location") {
			<-release
		}
	})
	defer close(release)
	c = openFake(t, slow.URL, "")
	go func() { _, _, _ = c.Stat(context.Background(), "first") }()
	time.Sleep(100 * time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, _, err := c.Stat(short, "second"); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("behind a slow question: %v, want EUnavailable", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a caller with 200 ms waited %v for another's question", took)
	}
}
