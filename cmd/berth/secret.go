package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
)

// isTTY reports whether f is a terminal (not merely a character device,
// as /dev/null is).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// readSecret asks for a secret at the controlling terminal: prompt, then
// one line read with echo off (restored however the read ends). An
// interrupt (ctx ends) stops the read.
func readSecret(ctx context.Context, prompt string) ([]byte, error) {
	// A file of its own: a pollable descriptor whose read a deadline can
	// stop, without changing the flags of the stdin the shell shares.
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the terminal: %w", err)
	}
	defer tty.Close()
	// Through the raw descriptor: Fd would make the file blocking, and
	// its read deadline (how an interrupt stops the read) would not work.
	raw, err := tty.SyscallConn()
	if err != nil {
		return nil, err
	}
	termios := func(set *unix.Termios) (old *unix.Termios, err error) {
		cerr := raw.Control(func(fd uintptr) {
			if set != nil {
				err = unix.IoctlSetTermios(int(fd), unix.TCSETS, set)
				return
			}
			old, err = unix.IoctlGetTermios(int(fd), unix.TCGETS)
		})
		return old, errors.Join(cerr, err)
	}
	old, err := termios(nil)
	if err != nil {
		return nil, fmt.Errorf("read the terminal's settings: %w", err)
	}
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	noEcho.Lflag |= unix.ICANON | unix.ISIG
	if _, err := termios(&noEcho); err != nil {
		return nil, fmt.Errorf("turn the terminal's echo off: %w", err)
	}
	defer termios(old)
	stop := context.AfterFunc(ctx, func() { _ = tty.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	if _, err := fmt.Fprint(tty, prompt); err != nil {
		return nil, err
	}
	line, err := bufio.NewReaderSize(tty, berth.MaxCredentialBytes+2).ReadSlice('\n')
	// The user's Enter was not echoed: end the prompt's line.
	fmt.Fprintln(tty)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, berth.Errorf(berth.EInvalid, "the value is longer than %d bytes", berth.MaxCredentialBytes)
	case err != nil && len(line) == 0:
		return nil, fmt.Errorf("read the value: %w", err)
	}
	value := trimNewline(append([]byte(nil), line...))
	if len(value) == 0 {
		return nil, berth.Errorf(berth.EInvalid, "no value given")
	}
	return value, nil
}
