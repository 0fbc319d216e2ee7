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
// Client is the store's few calls (over github.com/minio/minio-go/v7),
// each bounded by a timeout; Syncer uploads a session's state at each
// turn's end in the background; Restore writes a state back.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

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
	mc                       *minio.Client
	timeout, transferTimeout time.Duration
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
	// minio-go's own retries (10 by default, with backoff) would hold a
	// call for minutes against a store that is down; the Syncer retries.
	mc, err := minio.New(loc.Endpoint, &minio.Options{
		Creds:      credentials.NewStaticV4(access, secret, ""),
		Secure:     loc.Secure,
		Region:     loc.Region,
		MaxRetries: 1,
		Transport:  transport(),
	})
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "storage.url: the endpoint is not usable")
	}
	c := &Client{loc: loc, mc: mc, timeout: cfg.Timeout, transferTimeout: cfg.TransferTimeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.transferTimeout <= 0 {
		c.transferTimeout = DefaultTransferTimeout
	}
	return c, nil
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
	ok, err := c.mc.BucketExists(ctx, c.loc.Bucket)
	if err != nil {
		return c.wrap(err, "reach the bucket")
	}
	if ok {
		return nil
	}
	if err := c.mc.MakeBucket(ctx, c.loc.Bucket, minio.MakeBucketOptions{Region: c.loc.Region}); err != nil {
		if r := minio.ToErrorResponse(err); r.Code == "BucketAlreadyOwnedByYou" || r.Code == "BucketAlreadyExists" {
			return nil
		}
		return c.wrap(err, "create the bucket")
	}
	return nil
}

// Put stores size bytes of r at key (replacing what is there: one PUT,
// so a reader sees the old object or the new one, never a part).
func (c *Client) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	_, err := c.mc.PutObject(ctx, c.loc.Bucket, c.loc.key(key), r, size,
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: size >= 0 && size < 64<<20})
	return c.wrap(err, "write %s", key)
}

// Get opens the object at key and returns it with its size; ENotFound
// when there is none. The caller closes it; the read is bounded by the
// transfer timeout.
func (c *Client) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	return c.get(ctx, key, minio.GetObjectOptions{})
}

// GetRange opens the n > 0 bytes of the object at key from offset off;
// the reader ends early when the object does. ENotFound when there is no
// object, EInternal when it ends before off. The caller closes it.
func (c *Client) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+n-1); err != nil || n <= 0 {
		return nil, berth.Errorf(berth.EInternal, "object store: bad range %d+%d of %s", off, n, key)
	}
	r, _, err := c.get(ctx, key, opts)
	var be *berth.Error
	// 416: the object ends before off.
	if errors.As(err, &be) && minio.ToErrorResponse(be.Unwrap()).StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return nil, berth.WrapError(berth.EInternal, err, "object store: %s ends before byte %d", key, off)
	}
	return r, err
}

// get opens the object at key as opts say.
func (c *Client) get(ctx context.Context, key string, opts minio.GetObjectOptions) (io.ReadCloser, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	obj, err := c.mc.GetObject(ctx, c.loc.Bucket, c.loc.key(key), opts)
	if err != nil {
		cancel()
		return nil, 0, c.wrap(err, "read %s", key)
	}
	// GetObject is lazy: Stat makes the request, and says a missing key.
	st, err := obj.Stat()
	if err != nil {
		_ = obj.Close()
		cancel()
		return nil, 0, c.wrap(err, "read %s", key)
	}
	return &cancelCloser{ReadCloser: obj, cancel: cancel}, st.Size, nil
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
	st, err := c.mc.StatObject(ctx, c.loc.Bucket, c.loc.key(key), minio.StatObjectOptions{})
	if err != nil {
		if berth.IsCode(c.wrap(err, ""), berth.ENotFound) {
			return 0, false, nil
		}
		return 0, false, c.wrap(err, "look at %s", key)
	}
	return st.Size, true, nil
}

// List calls fn with each key under prefix (relative to the client's
// prefix, as given to Put) and its size, in key order.
func (c *Client) List(ctx context.Context, prefix string, fn func(key string, size int64) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	base := c.loc.key("")
	for obj := range c.mc.ListObjects(ctx, c.loc.Bucket, minio.ListObjectsOptions{Prefix: c.loc.key(prefix), Recursive: true}) {
		if obj.Err != nil {
			return c.wrap(obj.Err, "list %s", prefix)
		}
		if err := fn(strings.TrimPrefix(obj.Key, base), obj.Size); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the object at key; a missing one is no error.
func (c *Client) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.wrap(c.mc.RemoveObject(ctx, c.loc.Bucket, c.loc.key(key), minio.RemoveObjectOptions{}), "remove %s", key)
}

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
	if len(keys) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.transferTimeout)
	defer cancel()
	objs := make(chan minio.ObjectInfo)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(objs)
		for _, k := range keys {
			select {
			case objs <- minio.ObjectInfo{Key: k}:
			case <-ctx.Done():
				return
			}
		}
	}()
	failed := 0
	var first error
	for e := range c.mc.RemoveObjects(ctx, c.loc.Bucket, objs, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && minio.ToErrorResponse(e.Err).Code != "NoSuchKey" {
			failed++
			if first == nil {
				first = e.Err
			}
		}
	}
	// Cut short (ctx ended): the keys not sent were not removed.
	cut := ctx.Err()
	cancel()
	wg.Wait()
	if first == nil && cut != nil {
		first = cut
	}
	if first != nil {
		return len(keys) - failed, c.wrap(first, "remove %s (%d of %d objects)", prefix, failed, len(keys))
	}
	return len(keys), nil
}

// wrap gives err a berth code: ENotFound for a missing key or bucket,
// EForbidden for refused credentials, EUnavailable for the network, a
// timeout or a server error. The message names the object store, never
// the credentials.
func (c *Client) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == "NoSuchKey" || r.Code == "NoSuchBucket" || r.StatusCode == http.StatusNotFound:
		return berth.WrapError(berth.ENotFound, err, "object store: cannot %s: not found", what)
	case r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized ||
		r.Code == "AccessDenied" || r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch":
		return berth.WrapError(berth.EForbidden, err, "object store: cannot %s: the credentials are refused (%s)", what, r.Code)
	case r.Code == "PreconditionFailed":
		// Rewritten while it was read: try again.
		return berth.WrapError(berth.EUnavailable, err, "object store: cannot %s: it changed while it was read", what)
	case r.StatusCode >= 400 && r.StatusCode < 500:
		return berth.WrapError(berth.EInvalid, err, "object store: cannot %s: %s", what, r.Code)
	}
	// The network, a timeout, a 5xx, or an answer that is not S3's.
	return berth.WrapError(berth.EUnavailable, err, "object store: cannot %s: %s", what, reason(err))
}

// reason is a short, path-free word for why a call failed.
func reason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.As(err, &ne):
		return "unreachable"
	}
	if r := minio.ToErrorResponse(err); r.Code != "" {
		return r.Code
	}
	return "failed"
}
