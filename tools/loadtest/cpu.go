package main

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is the CPU time this process and the whole machine had used at
// one moment. On one machine the node and the tool share the cores, so the
// report shows how much of them the tool itself took, and how busy the
// machine was (anything else running skews the numbers).
type cpuSample struct {
	at   time.Time
	self time.Duration
	// node is the CPU time of the node's process, when the tool started it.
	node time.Duration
	// busy and total are /proc/stat's jiffies over all CPUs; cpus is their
	// number. Zero where /proc/stat cannot be read.
	busy, total uint64
	cpus        int
}

func sampleCPU(nodePID int) cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if nodePID > 0 {
		s.node = processCPU(nodePID)
	}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return s
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 0:
		case len(fields) > 4 && fields[0] == "cpu":
			for i, v := range fields[1:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				s.total += n
				if i != 3 && i != 4 { // idle, iowait
					s.busy += n
				}
			}
		case strings.HasPrefix(fields[0], "cpu"):
			s.cpus++
		}
	}
	return s
}

// cores returns how many cores' worth of CPU the tool, the node (0 when
// unknown) and the whole machine used between a and b.
func (a cpuSample) cores(b cpuSample) (tool, node, machine float64) {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0, 0
	}
	tool = (b.self - a.self).Seconds() / wall
	node = (b.node - a.node).Seconds() / wall
	if dt := b.total - a.total; dt > 0 && a.cpus > 0 {
		machine = float64(b.busy-a.busy) / float64(dt) * float64(a.cpus)
	}
	return tool, node, machine
}

// nodePID finds the depinchaind process serving home (started as
// `depinchaind start --home <home>`), or returns 0.
func nodePID(home string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if slices.Contains(args, "start") && slices.Contains(args, home) {
			return pid
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
const clockTicks = 100

// processCPU is the user and system CPU time a process has used.
func processCPU(pid int) time.Duration {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(fields[11], 10, 64) // field 14 of proc(5)
	stime, _ := strconv.ParseUint(fields[12], 10, 64) // field 15
	return time.Duration(utime+stime) * time.Second / clockTicks
}
