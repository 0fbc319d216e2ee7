package config

import (
	"strings"
	"testing"
)

// [storage] is read from the file and the environment, and what is wrong
// with it is refused naming the key (an unknown one included) without
// echoing the URL.
func TestStorageSection(t *testing.T) {
	const u = "s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1"
	c, err := Load(writeFile(t, "[storage]\nurl = \""+u+"\"\naccess_key_file = \"/etc/berth/s3.key\"\nsecret_key_file = \"/etc/berth/s3.secret\"\n"), nil)
	if err != nil || c.Storage.URL != u || c.Storage.AccessKeyFile != "/etc/berth/s3.key" || c.Storage.SecretKeyFile != "/etc/berth/s3.secret" || !c.Storage.Enabled() {
		t.Fatalf("from the file: %+v, %v", c.Storage, err)
	}
	c, err = Load("", []string{"BERTH_STORAGE_URL=" + u})
	if err != nil || c.Storage.URL != u || c.Storage.AccessKeyFile != "" {
		t.Fatalf("from the environment: %+v, %v", c.Storage, err)
	}
	if c, err := Load("", nil); err != nil || c.Storage.Enabled() || c.Storage.MaxFileBytes != GiB || c.Storage.MaxTotalBytes != 8*GiB {
		t.Fatalf("default: %+v, %v", c.Storage, err)
	}
	c, err = Load(writeFile(t, "[storage]\nmax_file_bytes = 4096\n"), []string{"BERTH_STORAGE_MAX_TOTAL_BYTES=65536"})
	if err != nil || c.Storage.MaxFileBytes != 4096 || c.Storage.MaxTotalBytes != 65536 {
		t.Fatalf("bounds: %+v, %v", c.Storage, err)
	}
	for _, tc := range []struct{ toml, want string }{
		{`url = "https://secret@bucket/x"`, "storage.url must be s3://"},
		{`url = "` + u + `"` + "\naccess_key_file = \"/k\"", "storage.access_key_file and storage.secret_key_file go together"},
		{`url = "` + u + `"` + "\naccess_key_file = \"k\"\nsecret_key_file = \"/s\"", "storage.access_key_file must be an absolute path"},
		{"access_key_file = \"/k\"\nsecret_key_file = \"/s\"", "storage.url is empty"},
		{`bucket = "b"`, `unknown key "storage.bucket"`},
		{"max_file_bytes = 0", "storage.max_file_bytes"},
		{"max_total_bytes = 1099511627777", "storage.max_total_bytes"},
	} {
		_, err := Load(writeFile(t, "[storage]\n"+tc.toml+"\n"), nil)
		wantInvalid(t, err, tc.want)
		if err != nil && strings.Contains(err.Error(), "secret@") {
			t.Errorf("%q: the error repeats the URL: %v", tc.toml, err)
		}
	}
}
