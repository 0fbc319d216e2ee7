package objstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A [storage] url gives the bucket, prefix, endpoint (https unless it
// says http) and region; anything else is EInvalid naming storage.url,
// without repeating the URL.
func TestParseURL(t *testing.T) {
	loc, err := ParseURL("s3://my-bucket/a/b/?endpoint=http://127.0.0.1:9000&region=us-east-1")
	if err != nil || loc != (Location{Bucket: "my-bucket", Prefix: "a/b", Endpoint: "127.0.0.1:9000", Region: "us-east-1"}) {
		t.Fatalf("http endpoint: %+v, %v", loc, err)
	}
	loc, err = ParseURL("s3://my-bucket?endpoint=s3.example.com")
	if err != nil || loc != (Location{Bucket: "my-bucket", Endpoint: "s3.example.com", Secure: true}) {
		t.Fatalf("no scheme: %+v, %v", loc, err)
	}
	if k := loc.key("blobs/x"); k != "blobs/x" {
		t.Fatalf("key without a prefix: %q", k)
	}
	for _, bad := range []string{
		"https://my-bucket/p?endpoint=h",
		"s3://user:hunter2@my-bucket/p?endpoint=h",
		"s3://My_Bucket/p?endpoint=h",
		"s3://my-bucket/p",
		"s3://my-bucket/p?endpoint=ftp://h",
		"s3://my-bucket/p?endpoint=h/path",
		"s3://my-bucket/a/../b?endpoint=h",
		"s3://my-bucket/p?endpoint=h&acl=public",
		"s3://my-bucket/p?endpoint=h&endpoint=i",
	} {
		_, err := ParseURL(bad)
		if berth.ErrorCode(err) != berth.EInvalid || !strings.Contains(err.Error(), "storage.url") {
			t.Errorf("%q: %v, want EInvalid naming storage.url", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error repeats the URL: %v", bad, err)
		}
	}
}

// The keys come from the key files (refused when others may read them,
// or when one is missing) or else from AWS_*; Open never reaches the
// server, and its errors never hold a key.
func TestOpenKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ak, sk := write("ak", "AKIDEXAMPLE\n", 0o600), write("sk", "s3cr3t-value\n", 0o600)
	open := write("open", "s3cr3t-value\n", 0o644)
	const u = "s3://b-1/p?endpoint=http://127.0.0.1:1"
	if _, err := Open(Config{URL: u, AccessKeyFile: ak, SecretKeyFile: sk}); err != nil {
		t.Fatalf("key files: %v", err)
	}
	if _, err := Open(Config{URL: u, Environ: []string{"AWS_ACCESS_KEY_ID=a", "AWS_SECRET_ACCESS_KEY=b"}}); err != nil {
		t.Fatalf("AWS_*: %v", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: u}, "no credentials"},
		{Config{URL: u, Environ: []string{"AWS_ACCESS_KEY_ID=a"}}, "no credentials"},
		{Config{URL: u, AccessKeyFile: ak}, "go together"},
		{Config{URL: u, AccessKeyFile: ak, SecretKeyFile: open}, "storage.secret_key_file"},
		{Config{URL: u, AccessKeyFile: ak, SecretKeyFile: filepath.Join(dir, "none")}, "storage.secret_key_file"},
		{Config{URL: u, AccessKeyFile: write("two", "a\nb\n", 0o600), SecretKeyFile: sk}, "one key on one line"},
	} {
		_, err := Open(tc.cfg)
		if berth.ErrorCode(err) != berth.EInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want EInvalid with %q", tc.cfg, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error holds the secret: %v", err)
		}
	}
}

func TestRegionName(t *testing.T) {
	for name, want := range map[string]bool{
		"us-east-1": true, "eu-west-1": true, "a": true, "0": true, "x" + strings.Repeat("y", 62): true,
		"": false, "-us": false, "us-": false, "US-EAST-1": false, "us_east": false, "us.east": false,
		"x" + strings.Repeat("y", 63): false, "é": false, "us east": false,
	} {
		if got := regionName(name); got != want {
			t.Errorf("regionName(%q) = %v, want %v", name, got, want)
		}
	}
}
