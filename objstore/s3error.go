package objstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/berth-sh/berth"
)

// s3Error is what the store answered to a failed call: its S3 error code
// and HTTP status, each zero when it did not say (or did not answer).
func s3Error(err error) (code string, status int) {
	if err == nil {
		return "", 0
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// wrap gives err a berth code: ENotFound for a missing key or bucket,
// EForbidden for refused credentials, EUnavailable for the network, a
// timeout or a server error. The message names the object store, never
// the credentials.
func (c *Client) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var be *berth.Error
	if errors.As(err, &be) {
		// Already ours (putParts' refusal of a size).
		return err
	}
	what := fmt.Sprintf(format, args...)
	code, status := s3Error(err)
	switch {
	case code == "NoSuchKey" || code == "NoSuchBucket" || status == http.StatusNotFound:
		return berth.WrapError(berth.ENotFound, err, "object store: cannot %s: not found", what)
	case status == http.StatusForbidden || status == http.StatusUnauthorized ||
		code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch":
		return berth.WrapError(berth.EForbidden, err, "object store: cannot %s: the credentials are refused (%s)", what, code)
	case code == "PreconditionFailed":
		// Rewritten while it was read: try again.
		return berth.WrapError(berth.EUnavailable, err, "object store: cannot %s: it changed while it was read", what)
	case status >= 400 && status < 500:
		return berth.WrapError(berth.EInvalid, err, "object store: cannot %s: %s", what, code)
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
	if code, _ := s3Error(err); code != "" {
		return code
	}
	return "failed"
}
