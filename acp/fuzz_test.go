package acp

import (
	"bytes"
	"testing"
)

// FuzzReader feeds arbitrary agent output through the reader: it must never
// panic and must keep reading after any garbage.
func FuzzReader(f *testing.F) {
	f.Add([]byte(notif(1) + "\n"))
	f.Add([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"method":"m"}` + "\n\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := &updates{}
		c := NewConn(fuzzRWC{bytes.NewReader(append(data, '\n'))}, clientDispatch{h}, Options{MaxLineBytes: 1024})
		c.Start()
		<-c.Done()
		c.Close()
	})
}

type fuzzRWC struct{ *bytes.Reader }

func (fuzzRWC) Write(b []byte) (int, error) { return len(b), nil }
func (fuzzRWC) Close() error                { return nil }
