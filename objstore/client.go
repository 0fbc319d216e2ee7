// Package objstore keeps sessions' state in an S3-compatible object store
// (docs/api.md, "Session state in an object store"): the contents of
// their workspaces, HOMEs and checkpoints, content-addressed and stored
// once (small files of a workspace or HOME in packs), and per session a
// state.json naming, as of its last completed turn, what to restore on
// another node.
//
// Layout under the [storage] url's prefix:
//
//	blobs/sha256/ab/abcdef…                  file contents, by SHA-256
//	packs/sha256/ab/abcdef…                  small files' contents end to end, by the pack's SHA-256
//	sessions/<id>/checkpoints/<ckpt>.json    a checkpoint's meta and entries
//	sessions/<id>/snapshots/<name>           a snapshot archive
//	sessions/<id>/state.json                 written once its files are in: the turn, seq and manifests
//
// Client is the store's few calls (over the AWS SDK's S3 client),
// each bounded by a timeout; Syncer uploads a session's state at each
// turn's end in the background; Restore writes a state back.
package objstore

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/berth-sh/berth"
)

// Config is what Open needs: the [storage] section and the environment.
type Config struct {
	// URL is [storage] url (ParseURL).
	URL string
	// AccessKeyFile and SecretKeyFile are [storage] access_key_file and
	// secret_key_file; both "" takes AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY from Environ.
	AccessKeyFile, SecretKeyFile string
	// Environ is the environment the AWS_* variables are read from.
	Environ []string
	// Timeout bounds each small call (HEAD, DELETE, a list page; default
	// DefaultTimeout); a transfer gets TransferTimeout (default
	// DefaultTransferTimeout).
	Timeout, TransferTimeout time.Duration
}

// Default timeouts of a Client's calls.
const (
	DefaultTimeout         = 15 * time.Second
	DefaultTransferTimeout = 5 * time.Minute
)

// Client is one bucket and prefix of an S3-compatible store. Its keys are
// relative to the prefix. Safe for concurrent use.
type Client struct {
	loc                      Location
	s3                       *s3.Client
	timeout, transferTimeout time.Duration
	// region is the bucket's region when the URL names none (bucketRegion).
	region discovered
}

// Open checks cfg and makes a Client. It reads the key files once, and
// does not reach the server: a store that is down must not stop the
// daemon (the Syncer retries). EInvalid naming the storage.* key that is
// wrong.
func Open(cfg Config) (*Client, error) {
	loc, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	access, secret, err := readKeys(cfg)
	if err != nil {
		return nil, err
	}
	scheme := "https://"
	if !loc.Secure {
		scheme = "http://"
	}
	creds := aws.Credentials{AccessKeyID: access, SecretAccessKey: secret, Source: "berth storage"}
	c := &Client{loc: loc, timeout: cfg.Timeout, transferTimeout: cfg.TransferTimeout,
		region: discovered{turn: make(chan struct{}, 1)}}
	c.s3 = s3.New(s3.Options{
		Region:       cmp.Or(loc.Region, defaultRegion),
		BaseEndpoint: aws.String(scheme + loc.Endpoint),
		UsePathStyle: pathStyle(loc),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
		// A redirect is not followed: Go would turn a PUT or DELETE into a
		// GET of another address, and the write would look done.
		HTTPClient: &http.Client{Transport: transport(), CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		// The SDK's own retries would hold a call against a store that is
		// down; the Syncer retries.
		Retryer: aws.NopRetryer{},
		// Checksums only where S3 requires one: every S3-compatible store
		// takes those, not all take the SDK's trailing ones.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.transferTimeout <= 0 {
		c.transferTimeout = DefaultTransferTimeout
	}
	return c, nil
}

// pathStyle reports whether the bucket is named in the path (every
// S3-compatible server takes that) rather than in the host name (what
// AWS's own endpoints prefer, for a bucket whose name is a DNS label).
func pathStyle(loc Location) bool {
	host, _, err := net.SplitHostPort(loc.Endpoint)
	if err != nil {
		host = loc.Endpoint
	}
	return !strings.HasSuffix(host, ".amazonaws.com") || strings.Contains(loc.Bucket, ".")
}

// transport is the HTTP transport of a Client: short dial and header
// timeouts (a store that does not answer is told at once).
func transport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = 30 * time.Second
	t.MaxIdleConnsPerHost = 16
	return t
}

// readKeys returns the access key and secret: from the key files when
// set (both, each at most readable by its owner), else from the AWS_*
// variables.
func readKeys(cfg Config) (access, secret string, err error) {
	if cfg.AccessKeyFile == "" && cfg.SecretKeyFile == "" {
		for _, kv := range cfg.Environ {
			if v, ok := strings.CutPrefix(kv, "AWS_ACCESS_KEY_ID="); ok {
				access = v
			} else if v, ok := strings.CutPrefix(kv, "AWS_SECRET_ACCESS_KEY="); ok {
				secret = v
			}
		}
		if access == "" || secret == "" {
			return "", "", berth.Errorf(berth.EInvalid, "storage: no credentials: set storage.access_key_file and storage.secret_key_file, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
		}
		return access, secret, nil
	}
	if cfg.AccessKeyFile == "" || cfg.SecretKeyFile == "" {
		return "", "", berth.Errorf(berth.EInvalid, "storage.access_key_file and storage.secret_key_file go together: set both")
	}
	if access, err = readKeyFile("storage.access_key_file", cfg.AccessKeyFile); err != nil {
		return "", "", err
	}
	if secret, err = readKeyFile("storage.secret_key_file", cfg.SecretKeyFile); err != nil {
		return "", "", err
	}
	return access, secret, nil
}

// maxKeyFileBytes bounds a key file.
const maxKeyFileBytes = 4096

// readKeyFile reads one key from path (the user's own file, so its
// path may be named), refusing a file others may read.
func readKeyFile(key, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", berth.WrapError(berth.EInvalid, err, "%s: cannot read %s", key, path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", berth.Errorf(berth.EInvalid, "%s: %s is not a regular file", key, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", berth.Errorf(berth.EInvalid, "%s: %s may be read by others (mode %04o): chmod 600 it", key, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return "", berth.WrapError(berth.EInvalid, err, "%s: cannot read %s", key, path)
	}
	v := strings.TrimSpace(string(b))
	if v == "" || len(b) > maxKeyFileBytes || strings.ContainsAny(v, "\n\r") {
		return "", berth.Errorf(berth.EInvalid, "%s: %s must hold one key on one line", key, path)
	}
	return v, nil
}

// Location is where the client writes.
func (c *Client) Location() Location { return c.loc }

// EnsureBucket makes the bucket when it does not exist.
func (c *Client) EnsureBucket(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return err
	}
	_, err = c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &c.loc.Bucket}, opts...)
	if err == nil {
		return nil
	}
	if _, status := s3Error(err); status != http.StatusNotFound {
		return c.wrap(err, "reach the bucket")
	}
	in := &s3.CreateBucketInput{Bucket: &c.loc.Bucket}
	// us-east-1 is the one region a bucket is made in without naming it.
	if r := c.loc.Region; r != "" && r != defaultRegion {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(r)}
	}
	if _, err := c.s3.CreateBucket(ctx, in, opts...); err != nil {
		if code, _ := s3Error(err); code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
		return c.wrap(err, "create the bucket")
	}
	return nil
}

// Put stores size bytes of r, from its start, at key (replacing what is
// there: one PUT, or for a large object parts completed at once, so a
// reader sees the old object or the new one, never a part). r is read at
// offsets because the request is signed over its content before it is
// sent.
func (c *Client) Put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return err
	}
	if size < 0 {
		return berth.Errorf(berth.EInternal, "object store: write %s: no size", key)
	}
	if size >= multipartFrom {
		return c.wrap(c.putParts(ctx, c.loc.key(key), r, size, opts), "write %s", key)
	}
	_, err = c.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &c.loc.Bucket,
		Key:           aws.String(c.loc.key(key)),
		Body:          io.NewSectionReader(r, 0, size),
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(contentType),
	}, opts...)
	return c.wrap(err, "write %s", key)
}

// contentType is every object's: berth's objects are read by berth.
const contentType = "application/octet-stream"

// Get opens the object at key and returns it with its size; ENotFound
// when there is none. The caller closes it; the read is bounded by the
// transfer timeout. One GET: the reader gets one version of the object
// whole, however often it is rewritten meanwhile.
func (c *Client) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	return c.get(ctx, key, nil)
}

// GetRange opens the n > 0 bytes of the object at key from offset off;
// the reader ends early when the object does. ENotFound when there is no
// object, EInternal when it ends before off. The caller closes it.
func (c *Client) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n <= 0 || off > math.MaxInt64-n {
		return nil, berth.Errorf(berth.EInternal, "object store: bad range %d+%d of %s", off, n, key)
	}
	r, _, err := c.get(ctx, key, aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)))
	// 416: the object ends before off.
	if _, status := s3Error(err); status == http.StatusRequestedRangeNotSatisfiable {
		return nil, berth.WrapError(berth.EInternal, err, "object store: %s ends before byte %d", key, off)
	}
	return r, err
}

// get opens the object at key, or the byte range rng of it when not nil.
func (c *Client) get(ctx context.Context, key string, rng *string) (io.ReadCloser, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	opts, err := c.opts(ctx)
	if err != nil {
		cancel()
		return nil, 0, err
	}
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &c.loc.Bucket, Key: aws.String(c.loc.key(key)), Range: rng}, opts...)
	if err != nil {
		cancel()
		return nil, 0, c.wrap(err, "read %s", key)
	}
	return &cancelCloser{ReadCloser: out.Body, cancel: cancel}, aws.ToInt64(out.ContentLength), nil
}

// cancelCloser ends a read's context when the reader is closed.
type cancelCloser struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// Close closes the object and ends its context.
func (c *cancelCloser) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// Stat reports whether an object is at key, and its size.
func (c *Client) Stat(ctx context.Context, key string) (size int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return 0, false, err
	}
	out, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &c.loc.Bucket, Key: aws.String(c.loc.key(key))}, opts...)
	if err != nil {
		if err = c.wrap(err, "look at %s", key); berth.IsCode(err, berth.ENotFound) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return aws.ToInt64(out.ContentLength), true, nil
}

// List calls fn with each key under prefix (relative to the client's
// prefix, as given to Put) and its size, in key order.
func (c *Client) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return err
	}
	base := c.loc.key("")
	pages := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: &c.loc.Bucket, Prefix: aws.String(c.loc.key(prefix))},
		func(o *s3.ListObjectsV2PaginatorOptions) { o.StopOnDuplicateToken = true })
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx, opts...)
		if err != nil {
			return c.wrap(err, "list %s", prefix)
		}
		// A page that says more follow and gives no way to them would end
		// the listing early, silently (a deletion that leaves objects).
		if aws.ToBool(page.IsTruncated) && aws.ToString(page.NextContinuationToken) == "" {
			return berth.Errorf(berth.EUnavailable, "object store: cannot list %s: the store cut the listing short", prefix)
		}
		for _, obj := range page.Contents {
			if err := fn(strings.TrimPrefix(aws.ToString(obj.Key), base), aws.ToInt64(obj.Size)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes the object at key; a missing one is no error.
func (c *Client) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return err
	}
	_, err = c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &c.loc.Bucket, Key: aws.String(c.loc.key(key))}, opts...)
	if code, _ := s3Error(err); code == "NoSuchKey" {
		return nil
	}
	return c.wrap(err, "remove %s", key)
}

// withContentMD5 adds the Content-MD5 that S3 asks of a DeleteObjects:
// the SDK sends a CRC32 checksum instead, which not every S3-compatible
// store takes (older MinIO refuses it).
func withContentMD5(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, smithyhttp.AddContentChecksumMiddleware)
}

// deleteBatch is the most keys one DeleteObjects request takes.
const deleteBatch = 1000

// DeletePrefix removes every object under prefix (relative to the
// client's prefix), up to a thousand a request, and returns how many it
// removed; none there is no error.
func (c *Client) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	var keys []string
	if err := c.List(ctx, prefix, func(key string, _ int64) error {
		keys = append(keys, c.loc.key(key))
		return nil
	}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	opts, err := c.opts(ctx)
	if err != nil {
		return 0, err
	}
	failed := 0
	var first error
	for i := 0; i < len(keys); i += deleteBatch {
		batch := keys[i:min(i+deleteBatch, len(keys))]
		objs := make([]types.ObjectIdentifier, len(batch))
		for j := range batch {
			objs[j].Key = &batch[j]
		}
		out, err := c.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &c.loc.Bucket,
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		}, append(opts, withContentMD5)...)
		if err != nil {
			// This batch and the ones not sent were not removed.
			failed += len(keys) - i
			first = cmp.Or(first, err)
			break
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			failed++
			if first == nil {
				first = &smithy.GenericAPIError{Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)}
			}
		}
	}
	if first != nil {
		return len(keys) - failed, c.wrap(first, "remove %s (%d of %d objects)", prefix, failed, len(keys))
	}
	return len(keys), nil
}
