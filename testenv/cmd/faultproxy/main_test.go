package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The command forwards to its target and carries out the commands it reads.
func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-raw", "-target", ln.Addr().String()}, inR, outW, io.Discard)
		outW.Close()
	}()
	out := bufio.NewScanner(outR)
	if !out.Scan() {
		t.Fatal("no address printed")
	}
	c, err := net.Dial("tcp", out.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	say := func(cmd, want string) {
		t.Helper()
		if _, err := io.WriteString(inW, cmd+"\n"); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() || !strings.Contains(out.Text(), want) {
			t.Fatalf("%q printed %q, want %q", cmd, out.Text(), want)
		}
	}
	echo := func(limit time.Duration) error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(limit))
		_, err := io.ReadFull(c, make([]byte, 1))
		return err
	}
	if err := echo(time.Second); err != nil {
		t.Fatal(err)
	}
	say("hang", "ok")
	if err := echo(200 * time.Millisecond); err == nil {
		t.Fatal("an echo through a hung proxy")
	}
	say("heal", "ok")
	if err := echo(time.Second); err != nil { // the held byte
		t.Fatal(err)
	}
	say("stats", "accepted 1")
	say("sideways", "unknown")
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
	if code := run([]string{"-listen", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, io.Discard); code != 2 {
		t.Fatalf("without -target: exit %d, want 2", code)
	}
}
