package config

import "testing"

// [checkpoints] defaults on, is read from the file and the environment,
// and refuses unknown keys and out-of-range sizes naming the key.
func TestCheckpointsSection(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Checkpoints.Enabled || c.Checkpoints.MaxFileBytes != 10*MiB || c.Checkpoints.MaxTotalBytes != GiB || c.Checkpoints.MaxTreeBytes != 2*GiB {
		t.Fatalf("defaults %+v", c.Checkpoints)
	}
	c, err = Load(writeFile(t, "[checkpoints]\nenabled = false\nmax_file_bytes = 4096\nmax_tree_bytes = 8388608\n"), []string{"BERTH_CHECKPOINTS_MAX_TOTAL_BYTES=65536"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Checkpoints.Enabled || c.Checkpoints.MaxFileBytes != 4096 || c.Checkpoints.MaxTotalBytes != 65536 || c.Checkpoints.MaxTreeBytes != 8*MiB {
		t.Fatalf("loaded %+v", c.Checkpoints)
	}
	_, err = Load(writeFile(t, "[checkpoints]\nmax_files_bytes = 3\n"), nil)
	wantInvalid(t, err, `unknown key "checkpoints.max_files_bytes"`)
	_, err = Load(writeFile(t, "[checkpoints]\nmax_file_bytes = 0\n"), nil)
	wantInvalid(t, err, "checkpoints.max_file_bytes")
	_, err = Load("", []string{"BERTH_CHECKPOINTS_MAX_TOTAL_BYTES=-1"})
	wantInvalid(t, err, "checkpoints.max_total_bytes")
	// No value means "unbounded": 0 and negatives are refused, 1 PiB is
	// the largest.
	for _, v := range []string{"0", "-1", "1125899906842625"} {
		_, err = Load(writeFile(t, "[checkpoints]\nmax_tree_bytes = "+v+"\n"), nil)
		wantInvalid(t, err, "checkpoints.max_tree_bytes = "+v)
	}
	_, err = Load("", []string{"BERTH_CHECKPOINTS_MAX_TREE_BYTES=0"})
	wantInvalid(t, err, "checkpoints.max_tree_bytes")
}
