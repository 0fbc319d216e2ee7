package bench

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The idle bench's reading of /proc sees a process that runs use CPU and
// one that sleeps use none.
func TestIdleUseTellsBusyFromIdle(t *testing.T) {
	start := func(name string, args ...string) int {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	busy, idle := start("sh", "-c", "while :; do :; done"), start("sleep", "600")
	// Each waits for the busy loop to use 50 ms more; the sleeping one
	// is measured over the second, long after its start.
	spin := func() idleUse {
		u0 := use([]int{busy})
		deadline := time.Now().Add(30 * time.Second)
		for use([]int{busy}).cpu-u0.cpu < 50*time.Millisecond {
			if time.Now().After(deadline) {
				t.Fatal("a busy loop used under 50 ms of CPU in 30 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		return u0
	}
	spin()
	idle0 := use([]int{idle})
	busy0 := spin()
	if u := use([]int{idle}); u.cpu-idle0.cpu > 5*time.Millisecond || u.switches-idle0.switches > 2 {
		t.Errorf("a sleeping process used %s of CPU and woke %d times", u.cpu-idle0.cpu, u.switches-idle0.switches)
	}
	if u := use([]int{busy, idle}); u.cpu < busy0.cpu+idle0.cpu || !u.at.After(busy0.at) {
		t.Errorf("the two together: %+v, before %+v and %+v", u, busy0, idle0)
	}
}
