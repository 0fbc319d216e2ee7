package config

import "testing"

// [credentials] key_file is read from the file and the environment, and a
// relative path is refused naming the key.
func TestCredentialsKeyFile(t *testing.T) {
	c, err := Load(writeFile(t, "[credentials]\nkey_file = \"/etc/berth/key\"\n"), nil)
	if err != nil || c.Credentials.KeyFile != "/etc/berth/key" {
		t.Fatalf("from the file: %+v, %v", c, err)
	}
	c, err = Load("", []string{"BERTH_CREDENTIALS_KEY_FILE=/run/secrets/berth-key"})
	if err != nil || c.Credentials.KeyFile != "/run/secrets/berth-key" {
		t.Fatalf("from the environment: %+v, %v", c, err)
	}
	_, err = Load(writeFile(t, "[credentials]\nkey_file = \"key\"\n"), nil)
	wantInvalid(t, err, "credentials.key_file")
	_, err = Load(writeFile(t, "[credentials]\nkeyfile = \"/k\"\n"), nil)
	wantInvalid(t, err, `unknown key "credentials.keyfile"`)
}
