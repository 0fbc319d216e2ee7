package objstore

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

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
	c, err := Open(Config{URL: "s3://bkt/pfx?endpoint=" + srv.URL + "&region=us-east-1",
		Environ: []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Put(testenv.Context(t), "big", bytes.NewReader(make([]byte, 12<<20)), 12<<20)
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
		c, err := Open(Config{URL: "s3://bkt/pfx?endpoint=" + srv.URL,
			Environ: []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"}})
		if err != nil {
			t.Fatal(err)
		}
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
