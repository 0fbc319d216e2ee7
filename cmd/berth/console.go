package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"golang.org/x/term"
)

// console is where berth attach reads typed lines and writes what it
// shows. At a terminal it is a line editor (golang.org/x/term) that keeps
// the line being typed below the output: a streamed answer arriving while
// the user types is written above their line, which is then drawn again,
// never mixed into it. Elsewhere (a pipe, a file) it reads lines as they
// come and writes straight through.
type console struct {
	// out is where everything shown goes.
	out io.Writer
	// color is set when out is a terminal and NO_COLOR is not set.
	color bool
	// readLine returns the next typed line; io.EOF when the input ends
	// (at a terminal: Ctrl-D on an empty line, or Ctrl-C).
	readLine func() (string, error)
	// close gives the terminal back as it was found.
	close func()
}

// attachPrompt is the line editor's prompt.
const attachPrompt = "> "

// openConsole makes the console of in and out: a line editor when both are
// the same kind of terminal, plain lines otherwise.
func openConsole(in io.Reader, out io.Writer) *console {
	inFile, inOK := in.(*os.File)
	outFile, outOK := out.(*os.File)
	if inOK && outOK && term.IsTerminal(int(inFile.Fd())) && term.IsTerminal(int(outFile.Fd())) {
		if c := openTerminalConsole(inFile, outFile); c != nil {
			return c
		}
	}
	sc := bufio.NewScanner(in)
	return &console{
		out:   out,
		color: isTerminal(out) && os.Getenv("NO_COLOR") == "",
		readLine: func() (string, error) {
			if sc.Scan() {
				return sc.Text(), nil
			}
			if err := sc.Err(); err != nil {
				return "", err
			}
			return "", io.EOF
		},
		close: func() {},
	}
}

// openTerminalConsole puts the terminal in raw mode under a line editor
// that follows the window's size; nil when the terminal refuses raw mode.
func openTerminalConsole(in, out *os.File) *console {
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil
	}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{in, out}, attachPrompt)
	above := &aboveTheLine{t: t}
	resize := func() {
		if w, h, err := term.GetSize(int(out.Fd())); err == nil {
			_ = t.SetSize(w, h)
			above.width.Store(int64(w))
		}
	}
	resize()
	// The window's size is followed until the console closes.
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-winch:
				resize()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return &console{
		out:   above,
		color: os.Getenv("NO_COLOR") == "",
		readLine: func() (string, error) {
			line, err := t.ReadLine()
			if err == nil {
				above.taken()
			}
			return line, err
		},
		close: func() {
			once.Do(func() {
				signal.Stop(winch)
				close(done)
				wg.Wait()
				// The prompt's line is left empty for the shell.
				_, _ = io.WriteString(out, "\r\x1b[K")
				_ = term.Restore(int(in.Fd()), old)
			})
		},
	}
}

// aboveTheLine writes output above the line being typed. The line editor
// draws the typed line again after each write, right where the output
// stopped: after an output line not yet ended (an answer streaming, a
// turn's progress dots) that would put both on one line. So such a line
// is ended on screen, the typed line going below it, and the next write
// goes back up and draws it again with what continues it.
type aboveTheLine struct {
	t *term.Terminal
	// width is the terminal's, in columns.
	width atomic.Int64
	mu    sync.Mutex
	// open is the output's last line, not yet ended, on the line right
	// above the typed one.
	open []byte
}

// taken says a typed line was sent: it stays on the screen, below the open
// output line, which is no longer right above the cursor. (Output written
// between the editor's Enter and this call may still go up one line too
// many: a cosmetic race the line editor gives no way to close.)
func (w *aboveTheLine) taken() {
	w.mu.Lock()
	w.open = nil
	w.mu.Unlock()
}

// Write writes p above the typed line.
func (w *aboveTheLine) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b bytes.Buffer
	if len(w.open) > 0 {
		// Up to the open line, which is drawn again.
		b.WriteString("\x1b[A\r\x1b[K")
	}
	text := append(w.open, p...)
	b.Write(text)
	rest := text[bytes.LastIndexByte(text, '\n')+1:]
	if width := int(w.width.Load()); len(rest) > 0 && width > 0 && visibleWidth(rest) >= width {
		// A line the terminal wrapped is left as it is: the next write
		// starts below it.
		rest = nil
	}
	w.open = append([]byte(nil), rest...)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		b.WriteByte('\n')
	}
	if _, err := w.t.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// visibleWidth counts the runes of s outside ANSI escape sequences.
func visibleWidth(s []byte) int {
	n, esc := 0, false
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		switch {
		case esc:
			// A CSI sequence ends with a letter.
			esc = !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
		case r == 0x1b:
			esc = true
		default:
			n++
		}
	}
	return n
}
