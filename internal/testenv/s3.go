package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
)

// The test S3-compatible server scripts/test starts (SeaweedFS): its
// [storage] url and its one access key.
const (
	S3URLEnv       = "BERTH_TEST_S3_URL"
	S3AccessKeyEnv = "BERTH_TEST_S3_ACCESS_KEY"
	S3SecretKeyEnv = "BERTH_TEST_S3_SECRET_KEY"
)

// S3 is the test object store for one test.
type S3 struct {
	// URL is a [storage] url whose prefix is the test's own.
	URL string
	// AccessKey and SecretKey are the server's key.
	AccessKey, SecretKey string
}

// S3Server returns the test S3 server with a prefix of the test's own
// below the one the environment names; Missing when it names none.
func S3Server(tb testing.TB) S3 {
	tb.Helper()
	raw, access, secret := os.Getenv(S3URLEnv), os.Getenv(S3AccessKeyEnv), os.Getenv(S3SecretKeyEnv)
	if raw == "" || access == "" || secret == "" {
		Missing(tb, "S3", "%s, %s and %s are not set (scripts/test starts a SeaweedFS server)", S3URLEnv, S3AccessKeyEnv, S3SecretKeyEnv)
	}
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatalf("%s: %v", S3URLEnv, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + strings.ToLower(tb.Name()[:min(len(tb.Name()), 40)]) + "-" + hex.EncodeToString(b)
	u.Path = strings.NewReplacer(" ", "_", "#", "_").Replace(u.Path)
	return S3{URL: u.String(), AccessKey: access, SecretKey: secret}
}

// Environ is the environment that gives the key as AWS_* variables.
func (s S3) Environ() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey}
}
