package objstore

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// defaultRegion is the region of a bucket whose store names none.
const defaultRegion = "us-east-1"

// discovered is a bucket's region as its store said it, asked once.
type discovered struct {
	mu   sync.Mutex
	name string
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

// bucketRegion asks the store for the bucket's region once: a store that
// answers anything but a location (no such bucket yet, a store without
// regions) gives the default; one that does not answer is asked again at
// the next call.
func (c *Client) bucketRegion(ctx context.Context) (string, error) {
	c.region.mu.Lock()
	defer c.region.mu.Unlock()
	if c.region.name != "" {
		return c.region.name, nil
	}
	// Asked as us-east-1: S3 answers GetBucketLocation so signed for a
	// bucket of any region.
	out, err := c.s3.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: &c.loc.Bucket})
	switch code, status := s3Error(err); {
	case err == nil:
		c.region.name = string(out.LocationConstraint)
	case code == "" && status == 0:
		return "", c.wrap(err, "ask the bucket's region")
	}
	switch c.region.name {
	case "":
		c.region.name = defaultRegion
	case "EU":
		// S3's old name of eu-west-1.
		c.region.name = "eu-west-1"
	}
	return c.region.name, nil
}
