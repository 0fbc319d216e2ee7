package homelock

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestASecondHolderIsRefusedWithTheFirstNamed(t *testing.T) {
	home := t.TempDir()
	l, err := Acquire(home)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetAddr("127.0.0.1:7380"); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(home)
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("second Acquire: %v, want unavailable", err)
	}
	msg := berth.ErrorMessage(err)
	if !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(msg, "127.0.0.1:7380") {
		t.Fatalf("the refusal does not name the holder: %q", msg)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(home)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// A holder killed with SIGKILL leaves its lock to the next daemon.
func TestADeadHoldersLockIsTakenOver(t *testing.T) {
	if os.Getenv("HOMELOCK_HOLD") != "" {
		if _, err := Acquire(os.Getenv("HOMELOCK_HOLD")); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Hour)
		return
	}
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestADeadHoldersLockIsTakenOver$")
	cmd.Env = append(os.Environ(), "HOMELOCK_HOLD="+home)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("the holder did not take the lock: %q %v", buf, err)
	}
	if _, err := Acquire(home); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("Acquire while a live process holds the lock: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	l, err := Acquire(home)
	if err != nil {
		t.Fatalf("the dead holder's lock was not taken over: %v", err)
	}
	defer l.Release()
	if _, err := os.Stat(filepath.Join(home, FileName)); err != nil {
		t.Fatal(err)
	}
}
