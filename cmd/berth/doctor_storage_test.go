package main

import (
	"strings"
	"testing"

	"github.com/berth-sh/berth/internal/testenv"
)

// With [storage] url, doctor reaches the object store (a probe object
// written, read back and removed) with the configured key, and fails,
// saying so, when the key is refused or the store is unreachable;
// without it the check is skipped.
func TestDoctorStorage(t *testing.T) {
	s3 := testenv.S3Server(t)
	home := t.TempDir()
	r, _ := doctor(t, home)
	if c := checkOf(t, r, "storage"); c.Status != checkSkip {
		t.Errorf("without [storage]: %+v", c)
	}
	r, code := doctor(t, home, append(s3.Environ(), "BERTH_STORAGE_URL="+s3.URL)...)
	if c := checkOf(t, r, "storage"); c.Status != checkOK || !strings.Contains(c.Detail, "probe object") {
		t.Errorf("a reachable store: %+v (exit %d)", c, code)
	}
	r, code = doctor(t, home, "BERTH_STORAGE_URL="+s3.URL, "AWS_ACCESS_KEY_ID="+s3.AccessKey, "AWS_SECRET_ACCESS_KEY=wrong-secret")
	if c := checkOf(t, r, "storage"); c.Status != checkFail || code != 1 || !strings.Contains(c.Detail, "refused") || strings.Contains(c.Detail, "wrong-secret") {
		t.Errorf("a refused key: %+v (exit %d)", c, code)
	}
	r, code = doctor(t, home, append(s3.Environ(), "BERTH_STORAGE_URL=s3://berth-test/x?endpoint=http://"+testenv.FreeAddr(t))...)
	if c := checkOf(t, r, "storage"); c.Status != checkFail || code != 1 {
		t.Errorf("an unreachable store: %+v (exit %d)", c, code)
	}
}
