package objstore

import (
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/berth-sh/berth"
)

// multipartFrom is the size from which Put sends an object in parts
// (variables so that a test sends parts of S3's smallest size).
var (
	multipartFrom int64 = 64 << 20
	partSize      int64 = 64 << 20
)

// maxParts is the most parts S3 takes for one object.
const maxParts = 10000

// putParts stores the size bytes of r at the full key full as a multipart
// upload of partSize parts, one after another; an upload that fails is
// aborted, so no part is left stored.
func (c *Client) putParts(ctx context.Context, full string, r io.ReaderAt, size int64, opts []func(*s3.Options)) error {
	if (size+partSize-1)/partSize > maxParts {
		return berth.Errorf(berth.EInvalid, "object store: %d bytes is more than %d parts of %d", size, maxParts, partSize)
	}
	up, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &c.loc.Bucket, Key: &full, ContentType: aws.String(contentType),
	}, opts...)
	if err != nil {
		return err
	}
	completed := false
	defer func() {
		if completed {
			return
		}
		// The call's context may be what ended: the abort gets its own.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		_, _ = c.s3.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &c.loc.Bucket, Key: &full, UploadId: up.UploadId,
		}, opts...)
	}()
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+partSize, n+1 {
		length := min(partSize, size-off)
		out, err := c.s3.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &c.loc.Bucket, Key: &full, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: io.NewSectionReader(r, off, length), ContentLength: aws.Int64(length),
		}, opts...)
		if err != nil {
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	_, err = c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &c.loc.Bucket, Key: &full, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, opts...)
	completed = err == nil
	return err
}
