package main

import (
	"bufio"
	"os"
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
	// busy and total are /proc/stat's jiffies over all CPUs; cpus is their
	// number. Zero where /proc/stat cannot be read.
	busy, total uint64
	cpus        int
}

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// cores returns how many cores' worth of CPU the tool and the machine used
// between a and b.
func (a cpuSample) cores(b cpuSample) (tool, machine float64) {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	tool = (b.self - a.self).Seconds() / wall
	if dt := b.total - a.total; dt > 0 && a.cpus > 0 {
		machine = float64(b.busy-a.busy) / float64(dt) * float64(a.cpus)
	}
	return tool, machine
}
