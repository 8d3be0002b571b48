package testenv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProxyCommands is the help of Proxy.Command's language, one command a line.
const ProxyCommands = `delay up|down|both DURATION    hold bytes for DURATION (0: no delay)
throttle up|down|both BYTES    forward at most BYTES a second (0: no limit)
hang [up|down|both]            forward nothing, close nothing (both by default)
blackhole [up|down|both]       discard the bytes, close nothing
refuse                         close every connection, and new ones at once
drop                           close the connections open now
lose N                         lose the next N replies
heal                           end every fault
stats                          print what the proxy did`

// errCommand is what Command says of a line it cannot carry out.
var errCommand = errors.New("testenv: proxy command")

// Command carries out one line of ProxyCommands on p (for testenv/cmd/faultproxy) and
// returns what to print.
func (p *Proxy) Command(line string) (string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "", nil
	}
	verb, args := f[0], f[1:]
	bad := func(why string) (string, error) { return "", fmt.Errorf("%w %q: %s", errCommand, line, why) }
	dir := Both
	if len(args) > 0 && (verb == "delay" || verb == "throttle" || verb == "hang" || verb == "blackhole") {
		var ok bool
		if dir, ok = parseDirection(args[0]); !ok {
			return bad("want up, down or both")
		}
		args = args[1:]
	}
	switch verb {
	case "delay":
		if len(f) != 3 {
			return bad("want delay up|down|both DURATION")
		}
		d, err := time.ParseDuration(args[0])
		if err != nil || d < 0 {
			return bad("want a duration such as 100ms")
		}
		p.Delay(dir, d)
	case "throttle":
		if len(f) != 3 {
			return bad("want throttle up|down|both BYTES")
		}
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n < 0 {
			return bad("want bytes a second")
		}
		p.Throttle(dir, n)
	case "hang", "blackhole":
		if len(args) != 0 {
			return bad("want " + verb + " [up|down|both]")
		}
		if verb == "hang" {
			p.Hang(dir)
		} else {
			p.Blackhole(dir)
		}
	case "lose":
		n, err := strconv.Atoi(strings.Join(args, ""))
		if len(args) != 1 || err != nil || n < 0 {
			return bad("want lose N")
		}
		p.LoseReplies(n)
	case "refuse", "drop", "heal", "stats":
		if len(args) != 0 {
			return bad("takes no arguments")
		}
		switch verb {
		case "refuse":
			p.Refuse()
		case "drop":
			p.Drop()
		case "heal":
			p.Heal()
		default:
			s := p.Stats()
			return fmt.Sprintf("accepted %d, refused %d, dropped %d, replies lost %d, bytes up %d, down %d",
				s.Accepted, s.Refused, s.Dropped, s.RepliesLost, s.Up, s.Down), nil
		}
	default:
		return bad("unknown; the commands are:\n" + ProxyCommands)
	}
	return "ok", nil
}

func parseDirection(s string) (Direction, bool) {
	switch s {
	case "up":
		return Up, true
	case "down":
		return Down, true
	case "both":
		return Both, true
	}
	return 0, false
}
