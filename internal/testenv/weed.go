package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// WeedEnv names the SeaweedFS binary scripts/test runs as the test S3
// server, for tests that stop and start a server of their own.
const WeedEnv = "BERTH_TEST_WEED"

// OwnS3 is an S3 server (SeaweedFS) of one test alone, which the test can
// stop, as a store that crashed, and start again on the same data.
type OwnS3 struct {
	S3
	tb    testing.TB
	bin   string
	dir   string
	ports []int
	cmd   *exec.Cmd
	done  chan struct{}
}

// StartOwnS3 starts an S3 server of the test's own, with the bucket of
// its URL made, and stops it when the test ends; Missing when scripts/test
// named no SeaweedFS binary.
func StartOwnS3(tb testing.TB) *OwnS3 {
	tb.Helper()
	bin := os.Getenv(WeedEnv)
	if bin == "" {
		Missing(tb, "S3 (SeaweedFS)", "%s is not set (scripts/test builds SeaweedFS)", WeedEnv)
	}
	s := &OwnS3{tb: tb, bin: bin, dir: ShortTempDir(tb, "berth-weed-")}
	s.AccessKey, s.SecretKey = "berth"+randHex(6), randHex(18)
	ident := fmt.Sprintf(`{"identities":[{"name":"berth","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`,
		s.AccessKey, s.SecretKey)
	if err := os.WriteFile(filepath.Join(s.dir, "s3.json"), []byte(ident), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "data"), 0o700); err != nil {
		tb.Fatal(err)
	}
	// Below the ephemeral range: no client's connection takes one of
	// them while the server is down.
	for len(s.ports) < 8 {
		_, port, _ := net.SplitHostPort(FreeAddr(tb))
		n, _ := strconv.Atoi(port)
		if !slices.Contains(s.ports, n) {
			s.ports = append(s.ports, n)
		}
	}
	s.URL = fmt.Sprintf("s3://berth-test/own?endpoint=http://127.0.0.1:%d&region=us-east-1", s.ports[6])
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

// Start starts the server on its data and ports and waits until it
// answers S3, making its bucket.
func (s *OwnS3) Start() {
	s.tb.Helper()
	p := make([]string, len(s.ports))
	for i, n := range s.ports {
		p[i] = strconv.Itoa(n)
	}
	cmd := exec.Command(s.bin, "server", "-dir="+filepath.Join(s.dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+p[0], "-master.port.grpc="+p[1], "-master.volumeSizeLimitMB=64",
		"-volume.port="+p[2], "-volume.port.grpc="+p[3], "-volume.max=0",
		"-filer", "-filer.port="+p[4], "-filer.port.grpc="+p[5], "-filer.localSocket="+filepath.Join(s.dir, "filer.sock"),
		"-s3", "-s3.port="+p[6], "-s3.port.grpc="+p[7], "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config="+filepath.Join(s.dir, "s3.json"))
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start the S3 server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
	mc := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:" + p[6]),
		UsePathStyle: true,
		Credentials:  aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		Retryer:      aws.NopRetryer{},
	})
	bucket := aws.String("berth-test")
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := mc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket})
		if err != nil {
			if _, herr := mc.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket}); herr == nil {
				err = nil
			}
		}
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			s.tb.Fatalf("the S3 server exited: %s", tail(filepath.Join(s.dir, "log")))
		default:
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("the S3 server did not answer in 90 s: %v\n%s", err, tail(filepath.Join(s.dir, "log")))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills the server's processes with SIGKILL and waits for them.
func (s *OwnS3) Stop() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// randHex is n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail is the last 2 KiB of the file at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	return string(b[max(0, len(b)-2048):])
}
