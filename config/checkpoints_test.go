package config

import "testing"

// [checkpoints] defaults on, is read from the file and the environment,
// and refuses unknown keys and out-of-range sizes naming the key.
func TestCheckpointsSection(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Checkpoints.Enabled || c.Checkpoints.MaxFileBytes != 10*MiB || c.Checkpoints.MaxTotalBytes != GiB {
		t.Fatalf("defaults %+v", c.Checkpoints)
	}
	c, err = Load(writeFile(t, "[checkpoints]\nenabled = false\nmax_file_bytes = 4096\n"), []string{"BERTH_CHECKPOINTS_MAX_TOTAL_BYTES=65536"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Checkpoints.Enabled || c.Checkpoints.MaxFileBytes != 4096 || c.Checkpoints.MaxTotalBytes != 65536 {
		t.Fatalf("loaded %+v", c.Checkpoints)
	}
	_, err = Load(writeFile(t, "[checkpoints]\nmax_files_bytes = 3\n"), nil)
	wantInvalid(t, err, `unknown key "checkpoints.max_files_bytes"`)
	_, err = Load(writeFile(t, "[checkpoints]\nmax_file_bytes = 0\n"), nil)
	wantInvalid(t, err, "checkpoints.max_file_bytes")
	_, err = Load("", []string{"BERTH_CHECKPOINTS_MAX_TOTAL_BYTES=-1"})
	wantInvalid(t, err, "checkpoints.max_total_bytes")
}
