package objstore

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/berth-sh/berth"
)

// defaultRegion is the region of a bucket whose store names none.
const defaultRegion = "us-east-1"

// discovered is a bucket's region as its store said it, asked by one
// call at a time.
type discovered struct {
	// turn is held (a value in it) by the call that asks or reads name.
	turn chan struct{}
	name string
}

// regionName reports whether name looks like a region: one DNS label of
// lower-case letters, digits and inner hyphens, as S3 signs it and as the
// SDK takes it. (Checked by hand: a regexp here was compiled in every
// berth process's start.)
func regionName(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// opts are the per-call options of a request to the bucket: none when
// the URL named the region, else the region the store gives the bucket
// (asked at the first call, then kept).
func (c *Client) opts(ctx context.Context) ([]func(*s3.Options), error) {
	if c.loc.Region != "" {
		return nil, nil
	}
	name, err := c.bucketRegion(ctx)
	if err != nil || name == defaultRegion {
		return nil, err
	}
	return []func(*s3.Options){func(o *s3.Options) { o.Region = name }}, nil
}

// bucketRegion asks the store for the bucket's region, and keeps the
// answer: a location, or the default when the store refuses the
// question (no regions, or not for these credentials). What is not an
// answer — no bucket yet, an error of the server's, no answer at all —
// gives the default for this call and asks again at the next; a region
// that is not a DNS label is EInvalid. A caller waits for another's
// question no longer than its context.
func (c *Client) bucketRegion(ctx context.Context) (string, error) {
	select {
	case c.region.turn <- struct{}{}:
	case <-ctx.Done():
		return "", c.wrap(ctx.Err(), "ask the bucket's region")
	}
	defer func() { <-c.region.turn }()
	if c.region.name != "" {
		return c.region.name, nil
	}
	ask, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// Asked as us-east-1: S3 answers GetBucketLocation so signed for a
	// bucket of any region.
	out, err := c.s3.GetBucketLocation(ask, &s3.GetBucketLocationInput{Bucket: &c.loc.Bucket})
	code, status := s3Error(err)
	switch {
	case err == nil:
		name := string(out.LocationConstraint)
		switch name {
		case "":
			name = defaultRegion
		case "EU":
			// S3's old name of eu-west-1.
			name = "eu-west-1"
		}
		if !regionName(name) {
			return "", berth.Errorf(berth.EInvalid, "object store: the store gives the bucket a region berth cannot sign for (%.64q): set region= in storage.url", name)
		}
		c.region.name = name
	case code == "" && status == 0:
		return "", c.wrap(err, "ask the bucket's region")
	case code == "NoSuchBucket" || status == http.StatusNotFound ||
		(status >= 500 && status != http.StatusNotImplemented && code != "NotImplemented"):
		return defaultRegion, nil
	default:
		// A refusal of the question (403, 405, 501, another 4xx): the
		// store has no regions to tell, or not to these credentials.
		c.region.name = defaultRegion
	}
	return c.region.name, nil
}
